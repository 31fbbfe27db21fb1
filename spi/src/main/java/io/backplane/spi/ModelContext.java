package io.backplane.spi;

import io.backplane.spi.config.ModelConfig;
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
}
