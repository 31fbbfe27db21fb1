package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackendContext;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.metrics.MetricRegistry;
import java.nio.file.Path;

/**
 * The {@link ModelContext} a backend sees for one model version: plain values, nothing else. It
 * is a separate object from the version's lifecycle, so a backend holding it (or casting it)
 * reaches no admission, holds or unload of the core.
 */
record VersionContext(String name, long version, ModelConfig config, Path modelDirectory, BackendContext backend, MetricRegistry metrics)
        implements ModelContext {
    VersionContext {
        requireNonNull(name, "name is null");
        requireNonNull(config, "config is null");
        requireNonNull(modelDirectory, "modelDirectory is null");
        requireNonNull(backend, "backend is null");
        requireNonNull(metrics, "metrics is null");
    }

    @Override
    public Path versionDirectory() {
        return modelDirectory.resolve(Long.toString(version));
    }

    @Override
    public String toString() {
        return "model '" + name + "' version " + version;
    }
}
