package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.Objects;

/**
 * Triton's {@code ModelQueuePolicy}. Immutable and thread-safe; no public constructor, so
 * fields can be added without breaking compiled plugins.
 */
public final class QueuePolicy {
    /** No timeout, no override, unbounded queue, REJECT. */
    public static final QueuePolicy DEFAULT = builder().build();

    private final TimeoutAction timeoutAction;
    private final long defaultTimeoutMicros;
    private final boolean allowTimeoutOverride;
    private final int maxQueueSize;

    private QueuePolicy(Builder b) {
        this.timeoutAction = requireNonNull(b.timeoutAction, "timeoutAction is null");
        this.defaultTimeoutMicros = b.defaultTimeoutMicros;
        this.allowTimeoutOverride = b.allowTimeoutOverride;
        this.maxQueueSize = b.maxQueueSize;
        if (defaultTimeoutMicros < 0) {
            throw new IllegalArgumentException("default_timeout_microseconds " + defaultTimeoutMicros + " is negative");
        }
        if (maxQueueSize < 0) {
            throw new IllegalArgumentException("max_queue_size " + maxQueueSize + " is negative");
        }
    }

    /**
     * A policy with these four values.
     *
     * @throws IllegalArgumentException when a number is negative (named in the message)
     */
    public static QueuePolicy of(TimeoutAction timeoutAction, long defaultTimeoutMicros, boolean allowTimeoutOverride, int maxQueueSize) {
        return builder().timeoutAction(timeoutAction).defaultTimeoutMicros(defaultTimeoutMicros).allowTimeoutOverride(allowTimeoutOverride)
                .maxQueueSize(maxQueueSize).build();
    }

    /** A builder starting from {@link #DEFAULT}'s values. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this policy's values. */
    public Builder toBuilder() {
        return builder().timeoutAction(timeoutAction).defaultTimeoutMicros(defaultTimeoutMicros).allowTimeoutOverride(allowTimeoutOverride)
                .maxQueueSize(maxQueueSize);
    }

    /** What an expired request gets. */
    public TimeoutAction timeoutAction() {
        return timeoutAction;
    }

    /** Queue timeout in microseconds, 0 for none. */
    public long defaultTimeoutMicros() {
        return defaultTimeoutMicros;
    }

    /** Whether a request's own timeout may shorten the default. */
    public boolean allowTimeoutOverride() {
        return allowTimeoutOverride;
    }

    /** Queued requests allowed; 0 for unbounded; overflow is rejected at once. */
    public int maxQueueSize() {
        return maxQueueSize;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof QueuePolicy q && timeoutAction == q.timeoutAction && defaultTimeoutMicros == q.defaultTimeoutMicros
                && allowTimeoutOverride == q.allowTimeoutOverride && maxQueueSize == q.maxQueueSize;
    }

    @Override
    public int hashCode() {
        return Objects.hash(timeoutAction, defaultTimeoutMicros, allowTimeoutOverride, maxQueueSize);
    }

    @Override
    public String toString() {
        return "QueuePolicy[timeoutAction=" + timeoutAction + ", defaultTimeoutMicros=" + defaultTimeoutMicros + ", allowTimeoutOverride="
                + allowTimeoutOverride + ", maxQueueSize=" + maxQueueSize + "]";
    }

    /** Builds {@link QueuePolicy}s; not thread-safe. */
    public static final class Builder {
        private TimeoutAction timeoutAction = TimeoutAction.REJECT;
        private long defaultTimeoutMicros;
        private boolean allowTimeoutOverride;
        private int maxQueueSize;

        private Builder() {
        }

        /** Sets {@link QueuePolicy#timeoutAction()}. */
        public Builder timeoutAction(TimeoutAction v) {
            timeoutAction = requireNonNull(v, "timeoutAction is null");
            return this;
        }

        /** Sets {@link QueuePolicy#defaultTimeoutMicros()}. */
        public Builder defaultTimeoutMicros(long v) {
            defaultTimeoutMicros = v;
            return this;
        }

        /** Sets {@link QueuePolicy#allowTimeoutOverride()}. */
        public Builder allowTimeoutOverride(boolean v) {
            allowTimeoutOverride = v;
            return this;
        }

        /** Sets {@link QueuePolicy#maxQueueSize()}. */
        public Builder maxQueueSize(int v) {
            maxQueueSize = v;
            return this;
        }

        /**
         * The policy.
         *
         * @throws IllegalArgumentException when a number is negative
         */
        public QueuePolicy build() {
            return new QueuePolicy(this);
        }
    }
}
