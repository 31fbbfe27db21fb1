package io.backplane.spi.host;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;

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
}
