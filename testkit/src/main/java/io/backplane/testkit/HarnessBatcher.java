package io.backplane.testkit;

import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import java.util.ArrayList;
import java.util.List;

/**
 * The {@link ModelHarness}'s batcher for {@code exactBatches()}: one request per batch, in arrival
 * order, except while {@link ModelHarness#batch} waits for its requests: then it holds requests until
 * that many are queued and hands exactly those to one instance as one batch.
 */
final class HarnessBatcher extends GatedBatcher {
    static final String NAME = "testkit-harness";

    private int target = 1;
    private long batchesTaken;

    /** One factory per harness; it remembers the batcher the core created for the model. */
    static final class Factory implements BatcherFactory {
        private volatile HarnessBatcher current = new HarnessBatcher();

        @Override
        public String name() {
            return NAME;
        }

        @Override
        public Batcher create(BatcherContext context) {
            HarnessBatcher b = new HarnessBatcher();
            current = b;
            return b;
        }

        HarnessBatcher current() {
            return current;
        }
    }

    /** The next {@code n} requests to arrive go out as one batch; returns the count of batches taken so far. */
    long expect(int n) {
        lock.lock();
        try {
            target = n;
            return batchesTaken;
        } finally {
            lock.unlock();
        }
    }

    /** Lowers the size of the awaited batch (some of its requests were refused before they were queued). */
    void retarget(int n) {
        lock.lock();
        try {
            target = Math.max(1, n);
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Waits until a batch after {@code before} was taken, then goes back to one request per batch. */
    boolean awaitTaken(long before, long deadlineNanos) throws InterruptedException {
        lock.lock();
        try {
            while (batchesTaken <= before && !closed) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                changed.awaitNanos(left);
            }
            return batchesTaken > before;
        } finally {
            target = 1;
            changed.signalAll();
            lock.unlock();
        }
    }

    @Override
    int target() {
        return target;
    }

    /** Exactly the awaited number of requests, in arrival order; counts the batch and wakes {@link #awaitTaken}. */
    @Override
    List<ScheduledRequest> take(int maxBatchSize) {
        List<ScheduledRequest> out = new ArrayList<>(target);
        for (int i = 0; i < target; i++) {
            out.add(queue.poll());
        }
        batchesTaken++;
        changed.signalAll();
        return out;
    }
}
