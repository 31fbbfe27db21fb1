package io.backplane.spi;

import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.metrics.MetricRegistry;
import java.nio.file.Path;

/**
 * One model version being loaded. Immutable, thread-safe.
 */
public interface ModelContext {
    /** The model's name. */
    String name();

    /** The version number (≥ 1). */
    long version();

    /** The checked (and, in {@link Backend#loadModel}, auto-completed) configuration. */
    ModelConfig config();

    /** {@code <repository>/<model>}. */
    Path modelDirectory();

    /** {@code <repository>/<model>/<version>}. */
    Path versionDirectory();

    /** The backend's host-level context. */
    BackendContext backend();

    /**
     * The host's custom-metrics registry, scoped to this model version: families created through
     * it are exported by the host's metrics plugin beside the built-in series, and are removed
     * when this version unloads (or fails to load). Thread-safe; never null.
     *
     * @throws UnsupportedOperationException when the host offers no custom metrics
     */
    default MetricRegistry metrics() {
        throw new UnsupportedOperationException("this host offers no custom metrics");
    }
}
