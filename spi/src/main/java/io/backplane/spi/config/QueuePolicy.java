package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

/**
 * Triton's {@code ModelQueuePolicy}.
 *
 * @param timeoutAction what an expired request gets
 * @param defaultTimeoutMicros queue timeout, 0 for none
 * @param allowTimeoutOverride whether a request's own timeout may shorten the default
 * @param maxQueueSize queued requests allowed; 0 for unbounded; overflow is rejected at once
 */
public record QueuePolicy(TimeoutAction timeoutAction, long defaultTimeoutMicros, boolean allowTimeoutOverride, int maxQueueSize) {
    public static final QueuePolicy DEFAULT = new QueuePolicy(TimeoutAction.REJECT, 0, false, 0);

    public QueuePolicy {
        requireNonNull(timeoutAction, "timeoutAction is null");
        if (defaultTimeoutMicros < 0) {
            throw new IllegalArgumentException("default_timeout_microseconds " + defaultTimeoutMicros + " is negative");
        }
        if (maxQueueSize < 0) {
            throw new IllegalArgumentException("max_queue_size " + maxQueueSize + " is negative");
        }
    }
}
