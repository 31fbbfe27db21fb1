package io.backplane.spi.host;

/** A streamed request in flight. Thread-safe. */
public interface RequestHandle {
    /** The host's id of the request (from a counter, unique for the host's lifetime). */
    long id();

    /**
     * Asks to cancel. A queued request ends at once with CANCELLED; an executing one is marked
     * cancelled for its backend, which still ends it. Returns whether the request was still open.
     */
    boolean cancel();

    /** Whether the request has ended. */
    boolean isDone();
}
