package io.backplane.core.batch;

import io.backplane.core.internal.Joinable;
import io.backplane.core.internal.Spin;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ScheduledRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

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
     *
     * <p><b>Quiet hand-off</b> (issue 16). A request whose caller blocks on it and runs it itself
     * when an instance is idle ({@link Joinable}) gains nothing from waking a worker: the caller
     * takes it back a microsecond later, and the wake-up only preempts the caller or the backend's
     * process on a small machine. While such requests come, one that finds nothing else queued is
     * queued <em>quietly</em>, without a signal (behind others, its caller could not run it now, and
     * one preempted before it joins would leave it there while the workers idle), and the workers wait in ticks of {@value #TICK_MICROS} µs instead of one long park; a
     * worker never takes a quiet request unless its caller left it there for a whole tick. A caller
     * that cannot run its request (every instance busy) or will not ({@code get} with a timeout)
     * hands it over at once, with the signal ({@link io.backplane.core.internal.Withdrawable#handOver}).
     * A tick that had to take a request its caller never came for (a caller that composes futures
     * instead of joining them) turns the quiet path off for a second, so such a caller pays at most
     * one tick a second. Fifty milliseconds after the last such request the workers stop ticking and
     * park, so an idle model still uses no CPU; a quiet request queued as a worker parks is handed
     * over by whichever side sees the other (each writes, then reads, volatile state). A request
     * queued with the signal while quiet ones wait moves them ahead of itself first, so the queue
     * stays first come, first served.
     */
    private static final class NoneBatcher implements Batcher, io.backplane.core.internal.Withdrawable {
        private static final ScheduledRequest CLOSED = new Poison();
        static final long TICK_MICROS = 1000;
        private static final long TICK_NANOS = TICK_MICROS * 1000;
        private static final long WATCH_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
        private static final long OFF_NANOS = TimeUnit.SECONDS.toNanos(1);
        private final LinkedBlockingQueue<ScheduledRequest> queue = new LinkedBlockingQueue<>();
        /** Quiet requests and when they were queued. */
        private final ConcurrentHashMap<ScheduledRequest, Long> quiet = new ConcurrentHashMap<>();
        /** Workers in (or entering) a long park: a quiet request must wake one of them. */
        private final AtomicInteger parked = new AtomicInteger();
        private final Spin spin = new Spin(50, TimeUnit.MICROSECONDS);
        private final int workers;
        private volatile boolean closed;
        /** A worker took a request lately: the next wait spins first. */
        private volatile boolean busy;
        /** Workers wait in ticks until then (a quiet candidate arrived lately). */
        private volatile long watchUntil;
        /** The quiet path is off until then (a tick took a request its caller never came for). */
        private volatile long offUntil;

        NoneBatcher(int workers) {
            this.workers = workers;
            long now = System.nanoTime();
            this.watchUntil = now;
            this.offUntil = now;
        }

        @Override
        public void enqueue(ScheduledRequest request) {
            // Only a request that finds nothing queued goes quietly: behind others, its caller could not run it
            // now anyway, and with many callers one that is preempted before it joins would leave its request
            // there while the workers idle.
            if (Joinable.callerHelps(request) && !closed && queue.isEmpty() && quiet.isEmpty()) {
                long now = System.nanoTime();
                if (now - offUntil >= 0) {
                    if (now - watchUntil > -WATCH_NANOS / 2) {
                        watchUntil = now + WATCH_NANOS; // written at most twice per watch period
                    }
                    quiet.put(request, now);
                    if (parked.get() > 0) {
                        handOver(request); // a worker parked before it saw the watch period: wake it
                    }
                    return;
                }
            }
            if (!quiet.isEmpty()) {
                handOverQuiet(); // first come, first served: a quiet request goes ahead of a later one
            }
            queue.add(request);
        }

        /** Moves every quiet request to the signalled queue, oldest first. */
        private void handOverQuiet() {
            List<Map.Entry<ScheduledRequest, Long>> waiting = new ArrayList<>(quiet.entrySet());
            waiting.sort(Map.Entry.comparingByValue());
            for (var e : waiting) {
                if (quiet.remove(e.getKey(), e.getValue())) {
                    queue.add(e.getKey());
                }
            }
        }

        @Override
        public void handOver(ScheduledRequest request) {
            if (quiet.remove(request) != null) {
                queue.add(request);
            }
        }

        @Override
        public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
            while (!closed) {
                ScheduledRequest r = queue.poll();
                if (r == null && busy && spin.await(() -> !queue.isEmpty() || closed)) {
                    r = queue.poll();
                }
                if (r == null) {
                    r = await(timeout, unit);
                }
                if (r == null || r == CLOSED) {
                    busy = false;
                    return List.of();
                }
                if (!r.sender().isClosed()) {
                    // the spin watches the signalled queue only: a quiet request stays its caller's to run
                    busy = true;
                    return List.of(r);
                }
            }
            return List.of();
        }

        /** Waits for the next request: one tick while quiet requests come, else one park. */
        private @Nullable ScheduledRequest await(long timeout, TimeUnit unit) throws InterruptedException {
            if (System.nanoTime() - watchUntil < 0) {
                ScheduledRequest r = queue.poll(Math.min(unit.toMicros(timeout), TICK_MICROS), TimeUnit.MICROSECONDS);
                return r != null ? r : rescue(TICK_NANOS);
            }
            parked.incrementAndGet();
            try {
                if (System.nanoTime() - watchUntil < 0) {
                    return null; // a quiet request came meanwhile: tick instead
                }
                ScheduledRequest r = rescue(0); // left over from the watch period that just ended
                return r != null ? r : queue.poll(timeout, unit);
            } finally {
                parked.decrementAndGet();
            }
        }

        /**
         * Takes a quiet request queued at least {@code age} ns ago: its caller did not come for it, so
         * it composes futures rather than joining them; the quiet path goes off for a while.
         */
        private @Nullable ScheduledRequest rescue(long age) {
            if (quiet.isEmpty()) {
                return null;
            }
            long now = System.nanoTime();
            for (var e : quiet.entrySet()) {
                if (now - e.getValue() >= age && quiet.remove(e.getKey(), e.getValue())) {
                    if (age > 0) {
                        offUntil = now + OFF_NANOS;
                        watchUntil = now;
                    }
                    return e.getKey();
                }
            }
            return null;
        }

        @Override
        public void cancelled(ScheduledRequest request) {
            if (quiet.remove(request) == null) {
                queue.remove(request);
            }
        }

        @Override
        public boolean withdraw(ScheduledRequest request) {
            return quiet.remove(request) != null || queue.remove(request);
        }

        @Override
        public List<ScheduledRequest> drain() {
            List<ScheduledRequest> out = new ArrayList<>();
            for (ScheduledRequest r : quiet.keySet()) {
                if (quiet.remove(r) != null) {
                    out.add(r);
                }
            }
            queue.drainTo(out);
            out.remove(CLOSED);
            return out;
        }

        @Override
        public int queued() {
            return queue.size() + quiet.size();
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
