package io.backplane.testkit;

import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ScheduledRequest;
import java.util.ArrayList;
import java.util.List;

/**
 * The kit's own batcher: it holds requests until its factory's target count of them are queued, then hands
 * them to one instance as one batch. It makes multi-request batches deterministic, so BATCHING
 * and per-request errors inside a batch (L5) are checked without timing.
 */
final class GateBatcher extends GatedBatcher {
    static final String NAME = "testkit-gate";

    /** One per host; the batch size is the factory's, so the model config carries only {@code batcher}. */
    static final class Factory implements BatcherFactory {
        private final int target;

        Factory(int target) {
            this.target = target;
        }

        @Override
        public String name() {
            return NAME;
        }

        @Override
        public Batcher create(BatcherContext context) {
            return new GateBatcher(target);
        }
    }

    private final int target;

    GateBatcher(int target) {
        this.target = Math.max(1, target);
    }

    @Override
    int target() {
        return target;
    }

    /** As many queued requests as fit {@code maxBatchSize}, in arrival order. */
    @Override
    List<ScheduledRequest> take(int maxBatchSize) {
        List<ScheduledRequest> out = new ArrayList<>();
        int total = 0;
        while (!queue.isEmpty() && total + queue.peek().batchSize() <= maxBatchSize) {
            ScheduledRequest r = queue.poll();
            total += r.batchSize();
            out.add(r);
        }
        return out;
    }
}
