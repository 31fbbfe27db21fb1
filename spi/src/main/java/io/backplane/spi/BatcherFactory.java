package io.backplane.spi;

/**
 * Creates {@link Batcher}s: one per loaded model version. Discovered through
 * {@link java.util.ServiceLoader} ({@code META-INF/services/io.backplane.spi.BatcherFactory}).
 * A model selects a batcher by the {@code batcher} entry of its {@code parameters}; without
 * one, models with a {@code dynamic_batching} block use {@code "dynamic"} and others
 * {@code "none"}.
 */
public interface BatcherFactory {
    /** The batcher's unique name, e.g. {@code "dynamic"}. */
    String name();

    /** See {@link BackendFactory#spiVersion()}. */
    default int spiVersion() {
        return Spi.VERSION;
    }

    /** Creates the batcher for one model version. Called on a host thread. */
    Batcher create(BatcherContext context);
}
