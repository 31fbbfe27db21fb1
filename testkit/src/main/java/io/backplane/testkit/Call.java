package io.backplane.testkit;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/** One request as its client saw it: every response, and the terminal outcomes (must be one). */
final class Call implements ResponseObserver {
    final long tag;
    final InferenceRequest request;
    final boolean streamed;
    final List<InferenceResponse> responses = new CopyOnWriteArrayList<>();
    final AtomicInteger terminals = new AtomicInteger();
    final AtomicInteger afterTerminal = new AtomicInteger();
    private final CountDownLatch done = new CountDownLatch(1);
    volatile @Nullable BackplaneException error;
    volatile long requestId;

    Call(long tag, InferenceRequest request, boolean streamed) {
        this.tag = tag;
        this.request = request;
        this.streamed = streamed;
    }

    @Override
    public void onResponse(InferenceResponse response) {
        if (terminals.get() > 0) {
            afterTerminal.incrementAndGet();
        }
        responses.add(response);
    }

    @Override
    public void onComplete() {
        terminals.incrementAndGet();
        done.countDown();
    }

    @Override
    public void onError(BackplaneException e) {
        error = e;
        terminals.incrementAndGet();
        done.countDown();
    }

    void completed(@Nullable InferenceResponse response, @Nullable Throwable failure) {
        if (failure != null) {
            Throwable t = failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null ? failure.getCause() : failure;
            onError(t instanceof BackplaneException b ? b : BackplaneException.wrap(t, "infer future failed"));
        } else {
            if (response != null) {
                onResponse(response);
            }
            onComplete();
        }
    }

    boolean await(Duration timeout) throws InterruptedException {
        return done.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    boolean succeeded() {
        return terminals.get() >= 1 && error == null;
    }

    String outcome() {
        BackplaneException e = error;
        if (terminals.get() == 0) {
            return "no outcome yet";
        }
        return e == null ? "success with " + responses.size() + " response(s)" : "error " + e.code() + ": " + e.getMessage();
    }
}
