package io.backplane.spi;

import io.backplane.spi.config.InstanceKind;

/**
 * Facts about one model instance, plus the one callback an instance may use on its own.
 * Thread-safe.
 */
public interface InstanceContext {
    /** Instance name, unique within the model version, e.g. {@code add_sub_0}. */
    String name();

    /** Index of this instance within the model version (0-based). */
    int index();

    /** Where it runs: {@link InstanceKind#CPU}, {@link InstanceKind#GPU} or {@link InstanceKind#MODEL}. */
    InstanceKind kind();

    /** The GPU ordinal for {@link InstanceKind#GPU}, else 0. */
    int deviceId();

    /** The model version this instance belongs to. */
    ModelContext model();

    /**
     * Reports that the instance can no longer serve (its process died, its device failed).
     * Callable from any thread, any number of times; the core fails the instance's executing
     * requests that are still open, closes the instance, and starts a replacement with capped
     * backoff. Idempotent.
     */
    void reportFailure(Throwable cause);
}
