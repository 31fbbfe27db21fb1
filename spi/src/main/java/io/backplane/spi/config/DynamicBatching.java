package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Triton's {@code dynamic_batching} block. Immutable and thread-safe; no public constructor, so
 * fields can be added without breaking compiled plugins. Build one with {@link #builder()}.
 */
public final class DynamicBatching {
    /** A block with every field at its default (no preferred sizes, no delay, one level). */
    public static final DynamicBatching DEFAULT = builder().build();

    private final List<Integer> preferredBatchSizes;
    private final long maxQueueDelayMicros;
    private final boolean preserveOrdering;
    private final int priorityLevels;
    private final int defaultPriorityLevel;
    private final QueuePolicy defaultQueuePolicy;
    private final Map<Integer, QueuePolicy> priorityQueuePolicy;

    private DynamicBatching(Builder b) {
        this.preferredBatchSizes = List.copyOf(b.preferredBatchSizes);
        this.maxQueueDelayMicros = b.maxQueueDelayMicros;
        this.preserveOrdering = b.preserveOrdering;
        this.priorityLevels = b.priorityLevels;
        this.defaultPriorityLevel = b.defaultPriorityLevel;
        this.defaultQueuePolicy = requireNonNull(b.defaultQueuePolicy, "defaultQueuePolicy is null");
        this.priorityQueuePolicy = Map.copyOf(b.priorityQueuePolicy);
        if (maxQueueDelayMicros < 0) {
            throw new IllegalArgumentException("max_queue_delay_microseconds " + maxQueueDelayMicros + " is negative");
        }
        if (priorityLevels < 0) {
            throw new IllegalArgumentException("priority_levels " + priorityLevels + " is negative");
        }
        if (priorityLevels > 0 && (defaultPriorityLevel < 1 || defaultPriorityLevel > priorityLevels)) {
            throw new IllegalArgumentException("default_priority_level " + defaultPriorityLevel + " must be between 1 and priority_levels "
                    + priorityLevels);
        }
        for (Integer level : priorityQueuePolicy.keySet()) {
            if (level < 1 || level > priorityLevels) {
                throw new IllegalArgumentException("priority_queue_policy names level " + level + " but priority_levels is " + priorityLevels);
            }
        }
        for (int p : preferredBatchSizes) {
            if (p < 1) {
                throw new IllegalArgumentException("preferred_batch_size " + p + " must be ≥ 1");
            }
        }
    }

    /** A builder starting from {@link #DEFAULT}'s values. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this block's values. */
    public Builder toBuilder() {
        return builder().preferredBatchSizes(preferredBatchSizes).maxQueueDelayMicros(maxQueueDelayMicros).preserveOrdering(preserveOrdering)
                .priorityLevels(priorityLevels).defaultPriorityLevel(defaultPriorityLevel).defaultQueuePolicy(defaultQueuePolicy)
                .priorityQueuePolicy(priorityQueuePolicy);
    }

    /** Batch sizes to dispatch at once when reached. Immutable. */
    public List<Integer> preferredBatchSizes() {
        return preferredBatchSizes;
    }

    /** Longest wait, from the oldest queued request, for a fuller batch. */
    public long maxQueueDelayMicros() {
        return maxQueueDelayMicros;
    }

    /** Whether responses leave in arrival order across instances. */
    public boolean preserveOrdering() {
        return preserveOrdering;
    }

    /** Number of priority levels (0 = one level). */
    public int priorityLevels() {
        return priorityLevels;
    }

    /** Level of requests that name none. */
    public int defaultPriorityLevel() {
        return defaultPriorityLevel;
    }

    /** Queue policy of every level without its own. */
    public QueuePolicy defaultQueuePolicy() {
        return defaultQueuePolicy;
    }

    /** Per-level queue policies. Immutable. */
    public Map<Integer, QueuePolicy> priorityQueuePolicy() {
        return priorityQueuePolicy;
    }

    /** The queue policy of {@code level} (its own, or the default). */
    public QueuePolicy policyFor(int level) {
        return priorityQueuePolicy.getOrDefault(level, defaultQueuePolicy);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DynamicBatching d && preferredBatchSizes.equals(d.preferredBatchSizes) && maxQueueDelayMicros == d.maxQueueDelayMicros
                && preserveOrdering == d.preserveOrdering && priorityLevels == d.priorityLevels && defaultPriorityLevel == d.defaultPriorityLevel
                && defaultQueuePolicy.equals(d.defaultQueuePolicy) && priorityQueuePolicy.equals(d.priorityQueuePolicy);
    }

    @Override
    public int hashCode() {
        return Objects.hash(preferredBatchSizes, maxQueueDelayMicros, preserveOrdering, priorityLevels, defaultPriorityLevel, defaultQueuePolicy,
                priorityQueuePolicy);
    }

    @Override
    public String toString() {
        return "DynamicBatching[preferredBatchSizes=" + preferredBatchSizes + ", maxQueueDelayMicros=" + maxQueueDelayMicros + ", preserveOrdering="
                + preserveOrdering + ", priorityLevels=" + priorityLevels + ", defaultPriorityLevel=" + defaultPriorityLevel
                + ", defaultQueuePolicy=" + defaultQueuePolicy + ", priorityQueuePolicy=" + priorityQueuePolicy + "]";
    }

    /** Builds {@link DynamicBatching} blocks; not thread-safe. */
    public static final class Builder {
        private List<Integer> preferredBatchSizes = new ArrayList<>();
        private long maxQueueDelayMicros;
        private boolean preserveOrdering;
        private int priorityLevels;
        private int defaultPriorityLevel;
        private QueuePolicy defaultQueuePolicy = QueuePolicy.DEFAULT;
        private Map<Integer, QueuePolicy> priorityQueuePolicy = new HashMap<>();

        private Builder() {
        }

        /** Sets {@link DynamicBatching#preferredBatchSizes()}. */
        public Builder preferredBatchSizes(List<Integer> v) {
            preferredBatchSizes = new ArrayList<>(requireNonNull(v, "preferredBatchSizes is null"));
            return this;
        }

        /** Sets {@link DynamicBatching#maxQueueDelayMicros()}. */
        public Builder maxQueueDelayMicros(long v) {
            maxQueueDelayMicros = v;
            return this;
        }

        /** Sets {@link DynamicBatching#preserveOrdering()}. */
        public Builder preserveOrdering(boolean v) {
            preserveOrdering = v;
            return this;
        }

        /** Sets {@link DynamicBatching#priorityLevels()}. */
        public Builder priorityLevels(int v) {
            priorityLevels = v;
            return this;
        }

        /** Sets {@link DynamicBatching#defaultPriorityLevel()}. */
        public Builder defaultPriorityLevel(int v) {
            defaultPriorityLevel = v;
            return this;
        }

        /** Sets {@link DynamicBatching#defaultQueuePolicy()}. */
        public Builder defaultQueuePolicy(QueuePolicy v) {
            defaultQueuePolicy = requireNonNull(v, "defaultQueuePolicy is null");
            return this;
        }

        /** Sets {@link DynamicBatching#priorityQueuePolicy()}. */
        public Builder priorityQueuePolicy(Map<Integer, QueuePolicy> v) {
            priorityQueuePolicy = new HashMap<>(requireNonNull(v, "priorityQueuePolicy is null"));
            return this;
        }

        /** Sets the queue policy of one priority level. */
        public Builder priorityQueuePolicy(int level, QueuePolicy policy) {
            priorityQueuePolicy.put(level, requireNonNull(policy, "policy is null"));
            return this;
        }

        /**
         * The block.
         *
         * @throws IllegalArgumentException naming the field and value when a value is out of range
         */
        public DynamicBatching build() {
            return new DynamicBatching(this);
        }
    }
}
