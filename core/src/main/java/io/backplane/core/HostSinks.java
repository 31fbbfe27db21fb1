package io.backplane.core;

import io.backplane.core.internal.ResponseSink;
import io.backplane.core.internal.Spin;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * Where {@link BackplaneHost}'s two client surfaces receive their request's outcome: the core
 * delivers to a {@link ResponseSink} exactly once per terminal (L1), and these turn it into what
 * the caller holds: {@link InferFuture} for {@link BackplaneHost#infer} (a future completed
 * exactly once; a blocking caller helps, then spins, before it parks) and {@link ObserverSink} for
 * {@link BackplaneHost#stream} (the observer's calls, and its {@code ready()} for flow control, P9).
 */
final class HostSinks {
    private HostSinks() {
    }

    /**
     * The future of one {@link BackplaneHost#infer}. A caller blocking on it without a timeout first runs the request itself when
     * it still waits in its queue and an instance is idle ({@link io.backplane.core.internal.Joinable}:
     * no hand-off to the worker, no wake-up back; the thread would block anyway, so no event loop
     * ever runs a model this way), then spins briefly ({@link Spin}): a fast model's response then
     * reaches it without a second thread wake-up.
     */
    static final class InferFuture extends CompletableFuture<InferenceResponse> implements ResponseSink {
        private final Spin spin;
        volatile @Nullable RequestHandle request;

        InferFuture(Spin spin) {
            this.spin = spin;
        }

        @Override
        public InferenceResponse get() throws InterruptedException, ExecutionException {
            helpThenSpin();
            return super.get();
        }

        @Override
        public InferenceResponse get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            // never helps: running the model here could outlast the caller's timeout; a worker takes it now
            if (!isDone() && request instanceof io.backplane.core.internal.Joinable j) {
                j.handOver();
            }
            spin.await(this::isDone);
            return super.get(timeout, unit);
        }

        @Override
        public InferenceResponse join() {
            helpThenSpin();
            return super.join();
        }

        private void helpThenSpin() {
            if (isDone()) {
                return;
            }
            if (request instanceof io.backplane.core.internal.Joinable j && j.help()) {
                return;
            }
            spin.await(this::isDone);
        }

        @Override
        public boolean streams() {
            return false;
        }

        @Override
        public boolean joins() {
            return true;
        }

        @Override
        public void partial(InferenceResponse response) {
            throw new IllegalStateException("a plain model sent a non-final response");
        }

        @Override
        public void last(@Nullable InferenceResponse last) {
            if (last == null) {
                completeExceptionally(BackplaneException.internal("the model ended the request without a response"));
            } else {
                complete(last);
            }
        }

        @Override
        public void failed(BackplaneException error) {
            completeExceptionally(error);
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            RequestHandle r = request;
            if (r != null) {
                r.cancel();
            }
            return super.cancel(mayInterruptIfRunning);
        }
    }

    record ObserverSink(ResponseObserver observer) implements ResponseSink {
        @Override
        public void partial(InferenceResponse response) {
            observer.onResponse(response);
        }

        @Override
        public void last(@Nullable InferenceResponse last) {
            if (last != null) {
                observer.onLastResponse(last);
            } else {
                observer.onComplete();
            }
        }

        @Override
        public void failed(BackplaneException error) {
            observer.onError(error);
        }

        @Override
        public java.util.concurrent.CompletionStage<Void> ready() {
            return observer.ready();
        }
    }

    /** The handle of a request that was refused: it never ran, so it is done and cannot be cancelled. */
    static final RequestHandle NOT_ACCEPTED = new RequestHandle() {
        @Override
        public long id() {
            return 0;
        }

        @Override
        public boolean cancel() {
            return false;
        }

        @Override
        public boolean isDone() {
            return true;
        }
    };
}
