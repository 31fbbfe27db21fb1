package io.backplane.testkit;

import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.batch.Batcher;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The kit's batchers' common part: a FIFO queue under one lock that hands out a batch only once
 * {@link #target()} requests are queued, so multi-request batches come without timing. What a
 * batch takes is the subclass's ({@link #take}); queue, cancel, drain and close are shared.
 */
abstract class GatedBatcher implements Batcher {
    final ReentrantLock lock = new ReentrantLock();
    /** Signalled on every change of the queue, the target or the closed flag. */
    final Condition changed = lock.newCondition();
    /** Guarded by {@link #lock}. */
    final ArrayDeque<ScheduledRequest> queue = new ArrayDeque<>();
    /** Guarded by {@link #lock}. */
    boolean closed;

    /** How many requests must be queued before a batch goes out; called with the lock held. */
    abstract int target();

    /** Takes the next batch out of the queue, which holds at least {@link #target()}; called with the lock held. */
    abstract List<ScheduledRequest> take(int maxBatchSize);

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
            while (!closed && queue.size() < target()) {
                if (left <= 0) {
                    return List.of();
                }
                left = changed.awaitNanos(left);
            }
            if (closed) {
                return List.of();
            }
            return take(maxBatchSize);
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
