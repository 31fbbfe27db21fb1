package io.backplane.testkit;

import java.nio.file.Path;

/**
 * Where tests find the model environment that {@code tools/model-env.sh} makes (a Python virtual
 * environment with torch, transformers, onnx, lightgbm and the like): {@code $BACKPLANE_MODEL_ENV}
 * when set, else {@code ~/.cache/backplane/model-env}. Tests that need it make their models with its
 * python and skip, naming {@code tools/model-env.sh}, where it is missing.
 */
public final class ModelEnvironment {
    /** The environment variable that points tests at another model environment. */
    public static final String VARIABLE = "BACKPLANE_MODEL_ENV";

    private ModelEnvironment() {
    }

    /** The environment's folder (it may not exist). */
    public static Path directory() {
        String env = System.getenv(VARIABLE);
        return env != null && !env.isBlank() ? Path.of(env) : Path.of(System.getProperty("user.home"), ".cache", "backplane", "model-env");
    }

    /** Its python executable (it may not exist). */
    public static Path python() {
        return directory().resolve("bin/python");
    }
}
