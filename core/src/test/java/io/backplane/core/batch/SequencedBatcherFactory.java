package io.backplane.core.batch;

import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The real {@code dynamic} batcher, registered in code under its own name, recording the order in
 * which requests enter its queue. Request ids are drawn at admission, before the queue, so two
 * concurrent callers may enter the queue in the other order; FIFO is checked against this order.
 */
final class SequencedBatcherFactory implements BatcherFactory {
    final Map<Long, Long> sequence = new ConcurrentHashMap<>();
    private long next;

    @Override
    public String name() {
        return DynamicBatcherFactory.NAME;
    }

    long of(ScheduledRequest r) {
        Long s = sequence.get(r.id());
        if (s == null) {
            throw new AssertionError("request " + r.id() + " was executed but never queued");
        }
        return s;
    }

    @Override
    public Batcher create(BatcherContext context) {
        Batcher real = new DynamicBatcherFactory().create(context);
        return new Batcher() {
            @Override
            public void enqueue(ScheduledRequest request) {
                synchronized (SequencedBatcherFactory.this) {
                    sequence.put(request.id(), next++);
                    real.enqueue(request);
                }
            }

            @Override
            public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
                return real.nextBatch(maxBatchSize, timeout, unit);
            }

            @Override
            public void cancelled(ScheduledRequest request) {
                real.cancelled(request);
            }

            @Override
            public List<ScheduledRequest> drain() {
                return real.drain();
            }

            @Override
            public int queued() {
                return real.queued();
            }

            @Override
            public void close() {
                real.close();
            }
        };
    }
}
