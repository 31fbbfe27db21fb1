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
 * @param generation time to first token, inter-token latency and output tokens, from the responses
 *     that carried output ({@link HostListener#responseSent}); Backplane's own figures, which
 *     Triton's statistics do not have
 * @param instances the version's instances now ({@link HostListener#instancesChanged}); 0 once it
 *     unloaded, and for an ensemble; Backplane's own figure, which Triton's statistics do not have
 */
public record ModelStatistics(String name, long version, long lastInference, long inferenceCount, long executionCount,
        Duration success, Duration fail, Duration queue, Duration computeInput, Duration computeInfer, Duration computeOutput,
        List<BatchStatistics> batches, List<MemoryUsage> memoryUsage, Duration cacheHit, Duration cacheMiss, Generation generation, int instances) {

    public ModelStatistics {
        requireNonNull(name, "name is null");
        batches = List.copyOf(batches);
        memoryUsage = List.copyOf(memoryUsage);
        requireNonNull(cacheHit, "cacheHit is null");
        requireNonNull(cacheMiss, "cacheMiss is null");
        requireNonNull(generation, "generation is null");
    }

    /** Statistics without an instance count (0). */
    public ModelStatistics(String name, long version, long lastInference, long inferenceCount, long executionCount,
            Duration success, Duration fail, Duration queue, Duration computeInput, Duration computeInfer, Duration computeOutput,
            List<BatchStatistics> batches, List<MemoryUsage> memoryUsage, Duration cacheHit, Duration cacheMiss, Generation generation) {
        this(name, version, lastInference, inferenceCount, executionCount, success, fail, queue, computeInput, computeInfer, computeOutput,
                batches, memoryUsage, cacheHit, cacheMiss, generation, 0);
    }

    /** Statistics without generation figures (none of its responses carried output). */
    public ModelStatistics(String name, long version, long lastInference, long inferenceCount, long executionCount,
            Duration success, Duration fail, Duration queue, Duration computeInput, Duration computeInfer, Duration computeOutput,
            List<BatchStatistics> batches, List<MemoryUsage> memoryUsage, Duration cacheHit, Duration cacheMiss) {
        this(name, version, lastInference, inferenceCount, executionCount, success, fail, queue, computeInput, computeInfer, computeOutput,
                batches, memoryUsage, cacheHit, cacheMiss, Generation.ZERO);
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

    /**
     * Generation figures of a version, from every response that carried output
     * ({@link HostListener#responseSent}).
     *
     * @param firstToken one per request that sent output: the time from its acceptance to its first
     *     such response (time to first token)
     * @param interToken one per output token of the later responses: a response of {@code k}
     *     tokens sent {@code t} ns after the previous one adds {@code k} to the count and {@code t}
     *     to the time, so {@code nanos / count} is the mean inter-token latency (the tokens of a
     *     request's first response have no inter-token latency)
     * @param outputTokens every output token sent, first responses included
     */
    public record Generation(Duration firstToken, Duration interToken, long outputTokens) {
        public static final Generation ZERO = new Generation(Duration.ZERO, Duration.ZERO, 0);

        public Generation {
            requireNonNull(firstToken, "firstToken is null");
            requireNonNull(interToken, "interToken is null");
            if (outputTokens < 0) {
                throw new IllegalArgumentException("outputTokens is " + outputTokens + ", must be >= 0");
            }
        }
    }

    /** Executions of one batch size: how many, and their compute time. */
    public record BatchStatistics(int batchSize, Duration computeInput, Duration computeInfer, Duration computeOutput) {
    }

    /** Memory a version holds on one device. */
    public record MemoryUsage(String type, long id, long bytes) {
    }
}
