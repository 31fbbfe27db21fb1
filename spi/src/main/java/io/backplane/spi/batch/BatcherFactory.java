package io.backplane.spi.batch;

import io.backplane.spi.Experimental;

/**
 * Creates {@link Batcher}s: one per loaded model version. Discovered through
 * {@link java.util.ServiceLoader} ({@code META-INF/services/io.backplane.spi.batch.BatcherFactory}).
 * A model selects a batcher by the {@code batcher} entry of its {@code parameters}; without
 * one, models with a {@code dynamic_batching} block use {@code "dynamic"} and others
 * {@code "none"}.
 */
@Experimental
public interface BatcherFactory {
    /** The batcher's unique name, e.g. {@code "dynamic"}. */
    String name();

    /** See {@link io.backplane.spi.BackendFactory#spiVersion()}: 0 (the default) lets the host read the jar's manifest. */
    default int spiVersion() {
        return 0;
    }

    /** Creates the batcher for one model version. Called on a host thread. */
    Batcher create(BatcherContext context);
}
