package io.backplane.core.batch;

import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.config.DynamicBatching;

/**
 * The {@code dynamic} batcher: Triton's {@code dynamic_batching} semantics (preferred batch
 * sizes, a queue delay measured from the oldest queued request, strict priority levels with a
 * queue policy each). The default for models with a {@code dynamic_batching} block. See
 * {@link DynamicBatcher} and {@code docs/batching.md}.
 */
public final class DynamicBatcherFactory implements BatcherFactory {
    public static final String NAME = "dynamic";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Batcher create(BatcherContext context) {
        DynamicBatching db = context.config().dynamicBatching();
        return new DynamicBatcher(context, db == null ? DynamicBatching.DEFAULT : db);
    }
}
