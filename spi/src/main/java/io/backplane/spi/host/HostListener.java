package io.backplane.spi.host;

/**
 * Observes what the host does, for metrics. Methods are called on hot paths from many threads:
 * implementations must be thread-safe, fast and must not throw (a throwing listener is logged
 * and otherwise ignored).
 */
public interface HostListener {
    /** How a request ended. */
    enum Outcome {
        SUCCESS,
        /** Rejected before queuing or by the queue (invalid input, queue full, timeout in queue). */
        REJECTED,
        CANCELED,
        /** The backend answered with an error, threw, or failed to answer. */
        BACKEND,
        /** Unload, instance failure, internal error. */
        OTHER
    }

    /**
     * A model version became ready to serve (its load or reload finished). Metrics create a
     * version's series here, so series exist only for models in the repository.
     */
    default void versionLoaded(String model, long version) {
    }

    /**
     * A model version became ready to serve, {@code loadNanos} after its load began (backend
     * model, batcher and every instance). The default calls {@link #versionLoaded(String, long)};
     * the core calls this one.
     */
    default void versionLoaded(String model, long version, long loadNanos) {
        versionLoaded(model, version);
    }

    /** A model version stopped serving: unloaded, or replaced by a reload, after its requests ended. */
    default void versionUnloaded(String model, long version) {
    }

    /** A request was accepted and queued. */
    default void requestAccepted(String model, long version) {
    }

    /**
     * A request {@linkplain #requestAccepted accepted} left its queue: an instance took it, the
     * response cache answered it, or it ended while it waited (cancelled, timed out, failed by an
     * unload). Called exactly once per accepted request, before its {@link #requestEnded}: accepted
     * minus left is what waits to execute (Triton's {@code nv_inference_pending_request_count}). A
     * rescheduled request (decoupled RESCHEDULE, an iterative sequence) waits again without being
     * reported again.
     *
     * @since SPI 5
     */
    default void requestLeftQueue(String model, long version) {
    }

    /**
     * A request ended (exactly once per accepted request).
     *
     * @param queueNanos time from acceptance to dispatch (to its end if never dispatched)
     * @param computeNanos time from dispatch to end (0 if never dispatched)
     */
    default void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
    }

    /** A request was rejected before it was accepted (unknown model, bad input, unavailable). */
    default void requestRejected(String model, Outcome outcome) {
    }

    /** A batch was dispatched to an instance. */
    default void batchExecuted(String model, long version, int requests, int batchSize) {
    }

    /** An instance was replaced after a failure. */
    default void instanceRestarted(String model, long version, String instance) {
    }

    /** A second release of an already-ended request was suppressed (L4). */
    default void duplicateReleaseSuppressed(String model, long version) {
    }

    /**
     * The response cache was searched for a request to a model with {@code response_cache}
     * enabled: a hit answers the request without executing it.
     *
     * @param lookupNanos the time the lookup took
     */
    default void cacheLookup(String model, long version, boolean hit, long lookupNanos) {
    }

    /** A response was stored in the response cache after a miss; {@code insertNanos} is the time that took. */
    default void cacheInserted(String model, long version, long insertNanos) {
    }
}
