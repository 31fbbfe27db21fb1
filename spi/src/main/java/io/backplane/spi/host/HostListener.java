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

    /**
     * A request sent a response that carries output: generation metrics (time to first token,
     * inter-token latency, output tokens). Called once per such response, for plain and decoupled
     * models alike (a plain model's one response is {@code first}), before the response reaches
     * the client and before the request's {@link #requestEnded}. Not called for an error response,
     * for a response without outputs (a decoupled model's bare FINAL), for a response whose
     * {@code num_output_tokens} is 0, nor for warm-up requests. A response answered from the
     * response cache counts as a first response.
     *
     * <p>The responses of one request are reported one at a time, in the order they were sent
     * (the core serialises a request's sends); different requests report concurrently from any
     * thread. Nothing is allocated for the call beyond the listener's own work.
     *
     * @param first whether this is the request's first such response
     * @param nanos for the first response, the time since the request was accepted (queue and
     *     compute: the time to first token); for a later one, the time since the request's
     *     previous such response (the inter-token latency of the {@code tokens} it carries)
     * @param tokens the output tokens this response carries, at least 1: the value of its output
     *     tensor {@code num_output_tokens} when it has one (Triton's vLLM backend convention: one
     *     element of type UINT32, INT32, INT64 or UINT64 in host memory), else 1
     * @since SPI 5
     */
    default void responseSent(String model, long version, boolean first, long nanos, long tokens) {
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

    /**
     * The number of instances of a version is now {@code instances}: once when it has loaded, each
     * time its instance counts change while it serves (a load whose config override changes only
     * {@code instance_group} counts, or the model's autoscaling policy), and 0 when it has unloaded.
     * A retiring instance counts until it is closed.
     */
    default void instancesChanged(String model, long version, int instances) {
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
