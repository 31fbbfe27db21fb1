package io.backplane.core.batch;

import io.backplane.core.internal.Spin;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ScheduledRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The {@code none} batcher: first come, first served, one request per execution (Triton's
 * default scheduler). Used by models without a {@code dynamic_batching} block.
 */
public final class NoneBatcherFactory implements BatcherFactory {
    public static final String NAME = "none";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Batcher create(BatcherContext context) {
        return new NoneBatcher(context.instanceCount());
    }

    /**
     * A FIFO queue. A worker that just took a request spins briefly ({@link Spin}) for the next one
     * before it parks, so a steady caller's request is handed over without a thread wake-up; a
     * worker whose wait timed out parks at once next time, so an idle model uses no CPU.
     */
    private static final class NoneBatcher implements Batcher, io.backplane.core.internal.Withdrawable {
        private static final ScheduledRequest CLOSED = new Poison();
        private final LinkedBlockingQueue<ScheduledRequest> queue = new LinkedBlockingQueue<>();
        private final Spin spin = new Spin(50, TimeUnit.MICROSECONDS);
        private final int workers;
        private volatile boolean closed;
        /** A worker took a request lately: the next wait spins first. */
        private volatile boolean busy;

        NoneBatcher(int workers) {
            this.workers = workers;
        }

        @Override
        public void enqueue(ScheduledRequest request) {
            queue.add(request);
        }

        @Override
        public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
            while (!closed) {
                ScheduledRequest r = queue.poll();
                if (r == null && busy && spin.await(() -> !queue.isEmpty() || closed)) {
                    r = queue.poll();
                }
                if (r == null) {
                    r = queue.poll(timeout, unit);
                }
                if (r == null || r == CLOSED) {
                    busy = false;
                    return List.of();
                }
                if (!r.sender().isClosed()) {
                    busy = true;
                    return List.of(r);
                }
            }
            return List.of();
        }

        @Override
        public void cancelled(ScheduledRequest request) {
            queue.remove(request);
        }

        @Override
        public boolean withdraw(ScheduledRequest request) {
            return queue.remove(request);
        }

        @Override
        public List<ScheduledRequest> drain() {
            List<ScheduledRequest> out = new ArrayList<>();
            queue.drainTo(out);
            out.remove(CLOSED);
            return out;
        }

        @Override
        public int queued() {
            return queue.size();
        }

        @Override
        public void close() {
            closed = true;
            for (int i = 0; i < workers; i++) {
                queue.add(CLOSED);
            }
        }
    }

    /** Wakes blocked workers on close. */
    private static final class Poison implements ScheduledRequest {
        @Override
        public long id() {
            return -1;
        }

        @Override
        public io.backplane.spi.InferenceRequest request() {
            throw new UnsupportedOperationException();
        }

        @Override
        public io.backplane.spi.ResponseSender sender() {
            throw new UnsupportedOperationException();
        }

        @Override
        public boolean isCancelled() {
            return true;
        }


        @Override
        public int batchSize() {
            return 0;
        }

        @Override
        public int priorityLevel() {
            return 0;
        }

        @Override
        public long arrivalNanos() {
            return 0;
        }
    }
}
