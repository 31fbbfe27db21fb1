package io.backplane.core.internal;

import io.backplane.spi.host.HostListener;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * Everything the embedded builder collected; immutable.
 *
 * @param rateLimiter the rate limiter's mode and resources ({@link RateLimiter})
 * @param allowLinksOutsideRepository whether a model's files may really (links followed) be outside
 *     its repository root ({@link io.backplane.core.repository.FileRoot})
 */
public record HostOptions(List<Path> repositories, List<Path> backendsDirectories, ModelControlMode controlMode, List<String> initialModels,
        Duration pollInterval, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax,
        Map<String, Map<String, String>> backendOptions, List<BackendFactory> backends, List<BatcherFactory> batchers,
        List<CodeModel> codeModels, Ticker ticker, List<HostListener> listeners, ClassLoader hostClassLoader, boolean callerRuns,
        long responseCacheBytes, Limits limits, boolean builtinWarmup, Duration ownWarmup, boolean allowLinksOutsideRepository,
        RateLimiter.Settings rateLimiter) {

    public HostOptions {
        repositories = List.copyOf(repositories);
        backendsDirectories = List.copyOf(backendsDirectories);
        initialModels = List.copyOf(initialModels);
        backendOptions = Map.copyOf(backendOptions);
        backends = List.copyOf(backends);
        batchers = List.copyOf(batchers);
        codeModels = List.copyOf(codeModels);
        listeners = List.copyOf(listeners);
        java.util.Objects.requireNonNull(rateLimiter, "rateLimiter is null");
    }

    /**
     * The host's bounds (O1, O2).
     *
     * @param memoryBudgetBytes bytes requests may hold at once ({@link MemoryBudget})
     * @param defaultMaxQueueSize requests one model version may queue when its config sets no
     *     {@code max_queue_size} (0: unbounded)
     * @param maxInstancesPerModel instances one model version may have
     * @param maxInstancesPerHost instances every loaded version together may have
     */
    public record Limits(long memoryBudgetBytes, int defaultMaxQueueSize, int maxInstancesPerModel, int maxInstancesPerHost) {
        public static final int DEFAULT_MAX_QUEUE_SIZE = 1024;
        public static final int DEFAULT_MAX_INSTANCES_PER_MODEL = 64;
        public static final int DEFAULT_MAX_INSTANCES_PER_HOST = 256;

        public Limits {
            if (memoryBudgetBytes <= 0 || defaultMaxQueueSize < 0 || maxInstancesPerModel <= 0 || maxInstancesPerHost <= 0) {
                throw new IllegalArgumentException("bad host limits " + memoryBudgetBytes + ", " + defaultMaxQueueSize + ", "
                        + maxInstancesPerModel + ", " + maxInstancesPerHost);
            }
        }

        /** The defaults: {@link MemoryBudget#defaultLimit()}, 1024 queued, 64 instances per model, 256 per host. */
        public static Limits defaults() {
            return new Limits(MemoryBudget.defaultLimit(), DEFAULT_MAX_QUEUE_SIZE, DEFAULT_MAX_INSTANCES_PER_MODEL, DEFAULT_MAX_INSTANCES_PER_HOST);
        }
    }

    /** A model defined in code. */
    public record CodeModel(ModelConfig config, List<Long> versions) {
        public CodeModel {
            versions = List.copyOf(versions);
        }
    }
}
