package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.core.repository.FileRoot;
import io.backplane.spi.BackendContext;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.metrics.MetricRegistry;
import java.nio.file.Path;

/**
 * The {@link ModelContext} a backend sees for one model version: plain values, nothing else. It
 * is a separate object from the version's lifecycle, so a backend holding it (or casting it)
 * reaches no admission, holds or unload of the core. {@code files}: where the model's files may
 * really be, what {@link #checkedFile} checks against.
 */
record VersionContext(String name, long version, ModelConfig config, Path modelDirectory, FileRoot files, BackendContext backend,
        MetricRegistry metrics) implements ModelContext {
    VersionContext {
        requireNonNull(name, "name is null");
        requireNonNull(config, "config is null");
        requireNonNull(modelDirectory, "modelDirectory is null");
        requireNonNull(files, "files is null");
        requireNonNull(backend, "backend is null");
        requireNonNull(metrics, "metrics is null");
    }

    @Override
    public Path versionDirectory() {
        return modelDirectory.resolve(Long.toString(version));
    }

    @Override
    public Path checkedFile(Path path, String what) {
        requireNonNull(path, "path is null");
        requireNonNull(what, "what is null");
        return files.checkFile(path, this + ": " + what);
    }

    @Override
    public String toString() {
        return "model '" + name + "' version " + version;
    }
}
