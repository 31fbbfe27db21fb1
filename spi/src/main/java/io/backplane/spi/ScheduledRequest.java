package io.backplane.spi;

/**
 * An accepted request as the core schedules it: the client's {@link InferenceRequest} plus the
 * core's bookkeeping. Batchers queue these; backends execute them.
 *
 * <p>Implemented by the core only. Thread-safe.
 */
public interface ScheduledRequest {
    /**
     * The core's id for this request: from a host-wide counter, unique for the host's lifetime,
     * increasing in arrival order. Never derived from thread ids or addresses.
     */
    long id();

    /** What the client sent. */
    InferenceRequest request();

    /** The sender for this request's responses. */
    ResponseSender sender();

    /**
     * Whether the client or the host asked to cancel this request. A backend that sees it may
     * stop work early, but must still end the request (a FINAL, typically an error with
     * {@link ErrorCode#CANCELLED}).
     */
    boolean isCancelled();

    /**
     * Whether the request has ended: the same state as {@code sender().isClosed()}, which is its
     * one name. Kept so that backends compiled against SPI 1 still link.
     *
     * @deprecated use {@code sender().isClosed()}
     */
    @Deprecated(since = "2", forRemoval = true)
    default boolean isDone() {
        return sender().isClosed();
    }

    /**
     * The number of items this request contributes to a batch: its first dimension for a model
     * with {@code max_batch_size > 0}, else 1.
     */
    int batchSize();

    /** Effective priority level, 1 highest (the request's own, or the model default). */
    int priorityLevel();

    /** When the core accepted the request, on the host's monotonic clock ({@link Ticker}). */
    long arrivalNanos();

    /**
     * The request's own queue-timeout override in microseconds, 0 when none; a batcher applies
     * it only when the queue policy allows overrides, and only to shorten the default.
     */
    default long timeoutOverrideMicros() {
        return request().timeoutMicros();
    }
}
