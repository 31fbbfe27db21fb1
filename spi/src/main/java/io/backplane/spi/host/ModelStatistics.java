package io.backplane.spi.host;

import static java.util.Objects.requireNonNull;

import java.util.List;

/**
 * Cumulative statistics of one model version since it was first loaded in this host, as Triton's
 * statistics extension reports them. Counts are of requests except {@link #executionCount()}, which
 * counts executions (batches); {@code inferenceCount} counts inferences (the batch dimension of
 * each request, 1 for models without batching).
 *
 * <p>The core times a request from acceptance to dispatch (queue) and from dispatch to its end
 * (compute). It does not yet see the backend's input, infer and output phases apart, so the whole
 * compute time is reported as {@code compute_infer} and the input and output phases as zero with
 * the same count.
 *
 * @param lastInference when the last request of this version ended, in milliseconds since the
 *     epoch (0 if none did)
 * @param memoryUsage memory held per device, where the backend reports it (empty when unknown)
 * @param cacheHit requests answered from the response cache, with the time their lookups took
 * @param cacheMiss requests the response cache did not hold, with the time their lookups and the
 *     insertions of their responses took
 */
public record ModelStatistics(String name, long version, long lastInference, long inferenceCount, long executionCount,
        Duration success, Duration fail, Duration queue, Duration computeInput, Duration computeInfer, Duration computeOutput,
        List<BatchStatistics> batches, List<MemoryUsage> memoryUsage, Duration cacheHit, Duration cacheMiss) {

    public ModelStatistics {
        requireNonNull(name, "name is null");
        batches = List.copyOf(batches);
        memoryUsage = List.copyOf(memoryUsage);
        requireNonNull(cacheHit, "cacheHit is null");
        requireNonNull(cacheMiss, "cacheMiss is null");
    }

    /** Statistics of a version that does not use the response cache. */
    public ModelStatistics(String name, long version, long lastInference, long inferenceCount, long executionCount,
            Duration success, Duration fail, Duration queue, Duration computeInput, Duration computeInfer, Duration computeOutput,
            List<BatchStatistics> batches, List<MemoryUsage> memoryUsage) {
        this(name, version, lastInference, inferenceCount, executionCount, success, fail, queue, computeInput, computeInfer, computeOutput,
                batches, memoryUsage, Duration.ZERO, Duration.ZERO);
    }

    /** A count and the total time of the counted events, in nanoseconds. */
    public record Duration(long count, long nanos) {
        public static final Duration ZERO = new Duration(0, 0);
    }

    /** Executions of one batch size: how many, and their compute time. */
    public record BatchStatistics(int batchSize, Duration computeInput, Duration computeInfer, Duration computeOutput) {
    }

    /** Memory a version holds on one device. */
    public record MemoryUsage(String type, long id, long bytes) {
    }
}
