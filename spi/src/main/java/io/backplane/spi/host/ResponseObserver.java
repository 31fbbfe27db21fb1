package io.backplane.spi.host;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.Experimental;
import io.backplane.spi.InferenceResponse;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Receives the responses of one streamed request. Calls are serialized (never concurrent) but
 * may come from any thread. After {@link #onResponse} zero or more times, exactly one of
 * {@link #onComplete}, {@link #onLastResponse} or {@link #onError} is called, and nothing after it.
 */
public interface ResponseObserver {
    /** One response (for a plain model, the only one, followed by {@link #onComplete}). */
    void onResponse(InferenceResponse response);

    /** The request ended normally, after its last {@link #onResponse} (or with none: a decoupled model's empty FINAL). */
    void onComplete();

    /**
     * The last response of a request that ended normally: the model sent it with FINAL, so it is
     * known to be the last one when it arrives (Triton's {@code triton_final_response=true}). The
     * default delivers it as {@link #onResponse} then {@link #onComplete}, which it calls even when
     * {@code onResponse} throws; override it to tell the last response apart without waiting.
     */
    default void onLastResponse(InferenceResponse response) {
        try {
            onResponse(response);
        } finally {
            onComplete();
        }
    }

    /** The request ended with an error (model error, cancellation, timeout, unload). */
    void onError(BackplaneException error);

    /**
     * Flow control (DESIGN P9): a stage that completes when this observer can take more responses,
     * for example when a client stream's outbound buffer has drained. The core hands it to the
     * backend through {@link io.backplane.spi.ResponseSender#ready()}, which completes on its own
     * when the request ends, so an observer whose consumer went away need not complete it (it
     * should, when its stream ends, to let go of the waiters early).
     *
     * <p>May be called from any thread, concurrently with the other methods, any number of times;
     * must not block and must never return null. The stage must never complete exceptionally.
     * Dependents of it may run on the thread that completes it, and never block. The default is
     * always ready: an observer that buffers (a future, a test) needs no flow control.
     *
     * @return a stage completing when this observer can take more responses
     */
    @Experimental
    default CompletionStage<Void> ready() {
        return CompletableFuture.completedStage(null);
    }
}
