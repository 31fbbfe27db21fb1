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

    /**
     * Checks a file or folder the backend is about to open by name for this model (its model file,
     * a file a config field or parameter names, an environment archive) against the host's rule for
     * the model repository, and returns it unchanged. Call it on the path exactly as you will open
     * it, before opening it (in {@link Backend#loadModel} or {@link Backend#autoCompleteConfig}),
     * from any thread, as often as needed; it reads the file system now and opens nothing.
     *
     * <p>The Backplane host's rule: the path's real path (every symbolic link followed, as the
     * kernel follows them when the file is opened) must be under the root of the model repository
     * the model was found in (for a model loaded with files, the private folder they were written
     * to). Links inside the root are fine, and so is a root that is itself a link. The host checks
     * nothing when it was started with links out of the repository allowed, and for a model defined
     * in code (it has no repository). A path that does not exist is returned unchanged: the backend
     * reports it missing, in its own words.
     *
     * <p>The default, for hosts that check nothing, returns {@code path} unchanged.
     *
     * @param path the file or folder: absolute, or relative to the process's working directory
     * @param what what the path is, for the error, e.g. {@code "default_model_filename"} or
     *     {@code "parameter EXECUTION_ENV_PATH"}
     * @return {@code path}, never null
     * @throws BackplaneException INVALID_ARGUMENT when the rule refuses the path, naming the model,
     *     {@code what}, the path, the link that leads out of the repository and where it points, and
     *     what to do (copy the file into the repository, or allow links out of it); also for a link
     *     loop on the way
     * @since SPI 5
     */
    default Path checkedFile(Path path, String what) {
        return path;
    }
}
