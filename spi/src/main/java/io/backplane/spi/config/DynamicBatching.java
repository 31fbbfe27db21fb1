package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.List;
import java.util.Map;

/**
 * Triton's {@code dynamic_batching} block.
 *
 * @param preferredBatchSizes batch sizes to dispatch at once when reached
 * @param maxQueueDelayMicros longest wait, from the oldest queued request, for a fuller batch
 * @param preserveOrdering whether responses leave in arrival order across instances
 * @param priorityLevels number of priority levels (0 = one level)
 * @param defaultPriorityLevel level of requests that name none
 * @param defaultQueuePolicy queue policy of every level without its own
 * @param priorityQueuePolicy per-level queue policies
 */
public record DynamicBatching(List<Integer> preferredBatchSizes, long maxQueueDelayMicros, boolean preserveOrdering,
        int priorityLevels, int defaultPriorityLevel, QueuePolicy defaultQueuePolicy, Map<Integer, QueuePolicy> priorityQueuePolicy) {
    public static final DynamicBatching DEFAULT = new DynamicBatching(List.of(), 0, false, 0, 0, QueuePolicy.DEFAULT, Map.of());

    public DynamicBatching {
        preferredBatchSizes = List.copyOf(preferredBatchSizes);
        requireNonNull(defaultQueuePolicy, "defaultQueuePolicy is null");
        priorityQueuePolicy = Map.copyOf(priorityQueuePolicy);
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

    /** The queue policy of {@code level} (its own, or the default). */
    public QueuePolicy policyFor(int level) {
        return priorityQueuePolicy.getOrDefault(level, defaultQueuePolicy);
    }
}
