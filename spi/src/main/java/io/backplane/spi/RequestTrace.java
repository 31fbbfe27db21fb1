package io.backplane.spi;

import org.jspecify.annotations.Nullable;

/**
 * The trace of one request (Triton's trace extension), as a host's tracer records it; no tracing
 * library appears here. A frontend gets one from its host's {@code RequestTracer} and puts it on
 * the request ({@link InferenceRequest.Builder#trace}); the core reports the request's queue and
 * compute times to it when the request ends, and gives each child request (BLS) a
 * {@link #child} trace; the frontend calls {@link #finish} once the client has its answer.
 * Implementations are thread-safe and must not throw; every method has a no-op default, and
 * {@link #NONE} (a request not traced) is all defaults.
 */
public interface RequestTrace {
    /** Not traced. */
    RequestTrace NONE = new RequestTrace() {
    };

    /**
     * The core accepted the request and it has now ended, {@code queueNanos} after acceptance it
     * was dispatched and {@code computeNanos} after that it ended (0 and 0 for a request that ended
     * in the queue: then {@code queueNanos} is its whole time). Called at most once, by the core.
     *
     * @param model the model version that served it
     * @param ok whether it succeeded
     */
    default void timings(String model, long version, long queueNanos, long computeNanos, boolean ok) {
    }

    /** The trace of a child request this request starts (a BLS step) to {@code model}. */
    default RequestTrace child(String model) {
        return NONE;
    }

    /** The request is over for its client (answer sent, or refused with {@code error}). Called once, by the frontend. */
    default void finish(@Nullable Throwable error) {
    }
}
