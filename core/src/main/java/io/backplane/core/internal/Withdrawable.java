package io.backplane.core.internal;

import io.backplane.spi.ScheduledRequest;

/**
 * A batcher of the core that can give a queued request back, atomically: after {@code true} no
 * worker can take it from the queue. The core runs such a request on the thread of a caller
 * that blocks on it ({@link Joinable}).
 */
public interface Withdrawable {
    /** Removes {@code request} from the queue; false when it is not queued (taken, cancelled, or never there). */
    boolean withdraw(ScheduledRequest request);

    /**
     * The caller of {@code request} will not run it after all (every instance is busy, or it waits
     * with a timeout): if the batcher queued it quietly, without waking a worker, it wakes one now.
     */
    default void handOver(ScheduledRequest request) {
    }
}
