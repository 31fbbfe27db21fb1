package io.backplane.spi.host;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;

/**
 * Receives the responses of one streamed request. Calls are serialized (never concurrent) but
 * may come from any thread. After {@link #onResponse} zero or more times, exactly one of
 * {@link #onComplete} or {@link #onError} is called, and nothing after it.
 */
public interface ResponseObserver {
    /** One response (for a plain model, the only one, followed by {@link #onComplete}). */
    void onResponse(InferenceResponse response);

    /** The request ended normally. */
    void onComplete();

    /** The request ended with an error (model error, cancellation, timeout, unload). */
    void onError(BackplaneException error);
}
