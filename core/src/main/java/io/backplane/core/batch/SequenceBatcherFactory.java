package io.backplane.core.batch;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.config.SequenceBatching;

/**
 * The {@code sequence} batcher: Triton's {@code sequence_batching} semantics (sequence slots per
 * instance, {@code direct} and {@code oldest} strategies, control inputs, implicit state, idle
 * release). The default for models with a {@code sequence_batching} block. See
 * {@link SequenceBatcher} and {@code docs/batching.md}.
 */
public final class SequenceBatcherFactory implements BatcherFactory {
    public static final String NAME = "sequence";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Batcher create(BatcherContext context) {
        SequenceBatching sb = context.config().sequenceBatching();
        if (sb == null) {
            throw BackplaneException.invalid("model '" + context.config().name() + "' asks for the sequence batcher but has no sequence_batching"
                    + " block; add sequence_batching { } to its config");
        }
        return new SequenceBatcher(context, sb);
    }
}
