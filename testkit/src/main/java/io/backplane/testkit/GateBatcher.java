package io.backplane.testkit;

import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ScheduledRequest;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The kit's own batcher: it holds requests until {@value #TARGET} of them are queued, then hands
 * them to one instance as one batch. It makes multi-request batches deterministic, so BATCHING
 * and per-request errors inside a batch (L5) are checked without timing.
 */
final class GateBatcher implements Batcher {
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
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final ArrayDeque<ScheduledRequest> queue = new ArrayDeque<>();
    private boolean closed;

    GateBatcher(int target) {
        this.target = Math.max(1, target);
    }

    @Override
    public void enqueue(ScheduledRequest request) {
        lock.lock();
        try {
            queue.add(request);
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        long left = unit.toNanos(timeout);
        lock.lock();
        try {
            while (!closed && queue.size() < target) {
                if (left <= 0) {
                    return List.of();
                }
                left = changed.awaitNanos(left);
            }
            if (closed) {
                return List.of();
            }
            List<ScheduledRequest> out = new ArrayList<>();
            int total = 0;
            while (!queue.isEmpty() && total + queue.peek().batchSize() <= maxBatchSize) {
                ScheduledRequest r = queue.poll();
                total += r.batchSize();
                out.add(r);
            }
            return out;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void cancelled(ScheduledRequest request) {
        lock.lock();
        try {
            queue.remove(request);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public List<ScheduledRequest> drain() {
        lock.lock();
        try {
            List<ScheduledRequest> out = List.copyOf(queue);
            queue.clear();
            return out;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public int queued() {
        lock.lock();
        try {
            return queue.size();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
