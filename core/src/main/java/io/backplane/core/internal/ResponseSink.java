package io.backplane.core.internal;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;

/**
 * Where a request's responses go: a future or a streaming observer. Called by
 * {@link RequestState} only, never concurrently for one request, and {@link #last} or
 * {@link #failed} exactly once, last.
 */
public interface ResponseSink {
    /** A non-final response (decoupled models only). */
    void partial(InferenceResponse response);

    /** The request ended normally; {@code last} is the final response, or null for a FINAL-only send. */
    void last(@Nullable InferenceResponse last);

    /** The request ended with an error. */
    void failed(BackplaneException error);

    /** When the consumer can take more responses (flow control, DESIGN P9); any thread, never blocks. */
    default CompletionStage<Void> ready() {
        return CompletableFuture.completedStage(null);
    }

    /**
     * Whether this sink takes any number of responses (a stream). A sink that takes exactly one
     * (a future) is refused by a decoupled model at admission.
     */
    default boolean streams() {
        return true;
    }

    /**
     * Whether a caller will block on this request's result (the embedded {@code infer} future):
     * such a caller may run the request itself while it waits ({@link Joinable#help}), which is
     * safe because the thread would block anyway.
     */
    default boolean joins() {
        return false;
    }
}
