package io.backplane.core.batch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.DataType;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.TensorConfig;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The sequence batcher alone: an idle model wakes its worker only for its own timeout (issue 16: an idle host uses no CPU). */
@Timeout(30)
class SequenceBatcherIdleTest {
    private static SequenceBatcher batcher() {
        SequenceBatching sb = SequenceBatching.builder().strategy(SequenceBatching.Strategy.DIRECT).maxSequenceIdleMicros(60_000_000).build();
        ModelConfig config = ModelConfig.builder("seq").backend(ScriptedBackend.NAME).maxBatchSize(4).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).sequenceBatching(sb)
                .instanceGroup(InstanceGroup.of("", 1, InstanceKind.CPU, List.of())).build();
        return (SequenceBatcher) new SequenceBatcherFactory().create(BatchFixture.context(config, Ticker.system(), (r, e) -> {
            throw new AssertionError("nothing is rejected here: " + e.getMessage());
        }));
    }

    @Test
    void idleModel_workerWaitsOnceForItsWholeTimeout() throws Exception {
        try (SequenceBatcher b = batcher()) {
            long before = b.waits();
            assertEquals(List.of(), b.nextBatch(0, 4, 300, TimeUnit.MILLISECONDS));
            long waits = b.waits() - before;
            // a 5 ms re-check would wait about 60 times in 300 ms; spurious wake-ups allow a few
            assertTrue(waits >= 1 && waits <= 3, "waits of an idle worker in one 300 ms call: " + waits);
        }
    }
}
