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

/** Everything the embedded builder collected; immutable. */
public record HostOptions(List<Path> repositories, List<Path> backendsDirectories, ModelControlMode controlMode, List<String> initialModels,
        Duration pollInterval, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax,
        Map<String, Map<String, String>> backendOptions, List<BackendFactory> backends, List<BatcherFactory> batchers,
        List<CodeModel> codeModels, Ticker ticker, List<HostListener> listeners, ClassLoader hostClassLoader, boolean callerRuns,
        long responseCacheBytes) {

    public HostOptions {
        repositories = List.copyOf(repositories);
        backendsDirectories = List.copyOf(backendsDirectories);
        initialModels = List.copyOf(initialModels);
        backendOptions = Map.copyOf(backendOptions);
        backends = List.copyOf(backends);
        batchers = List.copyOf(batchers);
        codeModels = List.copyOf(codeModels);
        listeners = List.copyOf(listeners);
    }

    /** A model defined in code. */
    public record CodeModel(ModelConfig config, List<Long> versions) {
        public CodeModel {
            versions = List.copyOf(versions);
        }
    }
}
