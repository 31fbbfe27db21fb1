package io.backplane.core.batch;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.TimeoutAction;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Triton's dynamic batcher for one model version.
 *
 * <p><b>State.</b> One lock guards everything: per priority level a FIFO queue and a FIFO
 * "delayed" queue (requests whose queue timeout passed under {@code timeout_action: DELAY}), and
 * a heap of queue deadlines (lazily cleaned). Every delay and timeout is read from the host's
 * {@link Ticker}; no wait is longer than {@link #MAX_WAIT_NANOS}, so an injected clock that jumps
 * is seen within a few milliseconds of real time.
 *
 * <p><b>Batch rule</b> (worker thread, in {@link #nextBatch}): walk the queues in priority order
 * (level 1 first; per level the main queue, then the delayed one), adding requests by their
 * batch size while they fit under the cap (the largest preferred batch size if any are set, else
 * the caller's maximum); stop at the first that does not fit (FIFO, B3). Send at once when the
 * batch is full, when the delay is 0, or when the oldest queued request has waited the delay
 * (B4); else send the largest preferred prefix if one formed; else wait until the oldest request's
 * delay ends or a request arrives.
 *
 * <p><b>Timeouts</b> (B5) fire on a timer thread ({@code backplane-batcher-*}, started with the
 * first request that has a deadline, stopped by {@link #close}) so they are answered while every
 * instance is busy; workers also expire requests before forming a batch, so an expired request
 * never executes. Rejections go through {@link BatcherContext#reject} outside the lock.
 */
final class DynamicBatcher implements Batcher {
    private static final Logger log = LoggerFactory.getLogger(DynamicBatcher.class);

    /** Longest single wait; bounds how late a jump of an injected clock is noticed. */
    static final long MAX_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(5);

    private final BatcherContext context;
    private final Ticker ticker;
    private final String model;
    private final long delayNanos;
    private final int maxPreferred;
    private final boolean[] preferred;
    private final Level[] levels;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition work = lock.newCondition();
    private final Condition timerWake = lock.newCondition();
    private final PriorityQueue<Entry> deadlines = new PriorityQueue<>(Comparator.comparingLong(e -> e.deadline));
    private int queuedRequests;
    private boolean closed;
    private @Nullable Thread timer;

    DynamicBatcher(BatcherContext context, DynamicBatching config) {
        this.context = requireNonNull(context, "context is null");
        this.ticker = requireNonNull(context.ticker(), "ticker is null");
        this.model = context.config().name();
        this.delayNanos = TimeUnit.MICROSECONDS.toNanos(config.maxQueueDelayMicros());
        int max = 0;
        for (int p : config.preferredBatchSizes()) {
            max = Math.max(max, p);
        }
        this.maxPreferred = max;
        this.preferred = new boolean[max + 1];
        for (int p : config.preferredBatchSizes()) {
            preferred[p] = true;
        }
        int n = Math.max(1, config.priorityLevels());
        this.levels = new Level[n];
        for (int i = 0; i < n; i++) {
            levels[i] = new Level(i + 1, config.priorityLevels() == 0 ? config.defaultQueuePolicy() : config.policyFor(i + 1));
        }
    }

    /** One queued request. Fields are guarded by the batcher's lock. */
    private static final class Entry {
        final ScheduledRequest request;
        final Level level;
        long deadline; // never changed while the entry is in the deadline heap
        boolean delayed;
        boolean gone;
        boolean oversize;

        Entry(ScheduledRequest request, Level level, long deadline) {
            this.request = request;
            this.level = level;
            this.deadline = deadline;
        }
    }

    /** One priority level: its policy, its queue, its delayed queue. */
    private static final class Level {
        final int number;
        final QueuePolicy policy;
        final ArrayDeque<Entry> main = new ArrayDeque<>();
        final ArrayDeque<Entry> delayed = new ArrayDeque<>();

        Level(int number, QueuePolicy policy) {
            this.number = number;
            this.policy = policy;
        }

        int size() {
            return main.size() + delayed.size();
        }
    }

    @Override
    public void enqueue(ScheduledRequest request) {
        int index = Math.clamp(request.priorityLevel(), 1, levels.length) - 1;
        Level level = levels[index];
        long timeoutMicros = queueTimeoutMicros(level.policy, request);
        long deadline = timeoutMicros == 0 ? Long.MAX_VALUE : request.arrivalNanos() + TimeUnit.MICROSECONDS.toNanos(timeoutMicros);
        lock.lock();
        try {
            if (closed) {
                throw BackplaneException.unavailable("the batcher of model '" + model + "' is closed; " + request + " was not queued");
            }
            int max = level.policy.maxQueueSize();
            if (max > 0 && level.size() >= max) {
                throw new BackplaneException(ErrorCode.RESOURCE_EXHAUSTED, "the queue of model '" + model + "' is full (priority level " + level.number
                        + ", max_queue_size " + max + "); " + request + " was rejected");
            }
            Entry e = new Entry(request, level, deadline);
            level.main.addLast(e);
            queuedRequests++;
            if (deadline != Long.MAX_VALUE) {
                deadlines.add(e);
                startTimer();
                timerWake.signal();
            }
            work.signal();
        } finally {
            lock.unlock();
        }
    }

    /** The request's queue timeout: the level's default, shortened by the request's own when the policy allows (0 = none). */
    static long queueTimeoutMicros(QueuePolicy policy, ScheduledRequest request) {
        long t = policy.defaultTimeoutMicros();
        if (policy.allowTimeoutOverride()) {
            long own = request.timeoutOverrideMicros();
            if (own > 0 && (t == 0 || own < t)) {
                t = own;
            }
        }
        return t;
    }

    @Override
    public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        long limit = System.nanoTime() + unit.toNanos(timeout);
        int cap = Math.max(1, maxBatchSize);
        int capPreferred = maxPreferred > 0 ? Math.min(maxPreferred, cap) : cap;
        List<Entry> rejected = new ArrayList<>(0);
        List<ScheduledRequest> batch = List.of();
        lock.lockInterruptibly();
        try {
            while (!closed) {
                long now = ticker.nanoTime();
                expire(now, rejected);
                long wait = Long.MAX_VALUE;
                if (queuedRequests > 0) {
                    Plan plan = plan(cap, capPreferred, now, rejected);
                    if (plan.take > 0) {
                        batch = take(plan.take);
                        break;
                    }
                    wait = Math.min(plan.waitNanos, MAX_WAIT_NANOS);
                }
                long left = limit - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                work.awaitNanos(Math.min(wait, left));
            }
            if (!batch.isEmpty() && queuedRequests > 0) {
                work.signal(); // more is queued: the next idle worker may form its batch now
            }
        } finally {
            lock.unlock();
            reject(rejected);
        }
        return batch;
    }

    private record Plan(int take, long waitNanos) {
    }

    /** Decides what to send now (caller holds the lock). */
    private Plan plan(int cap, int capPreferred, long now, List<Entry> rejected) {
        int size = 0;
        int count = 0;
        int bestPreferred = 0;
        boolean full = false;
        walk:
        for (Level level : levels) {
            for (ArrayDeque<Entry> q : List.of(level.main, level.delayed)) {
                for (Iterator<Entry> it = q.iterator(); it.hasNext();) {
                    Entry e = it.next();
                    if (e.request.sender().isClosed()) { // withdrawn by the core (cancel, unload) before we heard of it
                        it.remove();
                        e.gone = true;
                        queuedRequests--;
                        continue;
                    }
                    int bs = Math.max(1, e.request.batchSize());
                    if (bs > cap) { // the core's validator prevents this; never queue it forever (scenario 27)
                        it.remove();
                        e.gone = true;
                        queuedRequests--;
                        e.oversize = true;
                        rejected.add(e);
                        continue;
                    }
                    if (size + bs > capPreferred) {
                        if (count == 0) { // bigger than the largest preferred size but within max: it goes alone
                            count = 1;
                            size = bs;
                        }
                        full = true;
                        break walk;
                    }
                    size += bs;
                    count++;
                    if (size < preferred.length && preferred[size]) {
                        bestPreferred = count;
                    }
                    if (size == capPreferred) {
                        full = true;
                        break walk;
                    }
                }
            }
        }
        if (count == 0) {
            return new Plan(0, Long.MAX_VALUE);
        }
        long waited = now - oldestArrival();
        if (full || delayNanos == 0 || waited >= delayNanos) {
            return new Plan(count, 0);
        }
        if (bestPreferred > 0) {
            return new Plan(bestPreferred, 0);
        }
        return new Plan(0, delayNanos - waited);
    }

    /** Arrival of the oldest request not yet past its timeout (the heads of the main queues), else of any delayed one. */
    private long oldestArrival() {
        long oldest = Long.MAX_VALUE;
        for (Level level : levels) {
            Entry h = level.main.peekFirst();
            if (h != null) {
                oldest = Math.min(oldest, h.request.arrivalNanos());
            }
        }
        if (oldest == Long.MAX_VALUE) {
            for (Level level : levels) {
                Entry h = level.delayed.peekFirst();
                if (h != null) {
                    oldest = Math.min(oldest, h.request.arrivalNanos());
                }
            }
        }
        return oldest;
    }

    /** Removes the first {@code n} requests in walk order (caller holds the lock; {@link #plan} just cleaned them). */
    private List<ScheduledRequest> take(int n) {
        List<ScheduledRequest> out = new ArrayList<>(n);
        for (Level level : levels) {
            for (ArrayDeque<Entry> q : List.of(level.main, level.delayed)) {
                while (out.size() < n && !q.isEmpty()) {
                    Entry e = q.pollFirst();
                    e.gone = true;
                    queuedRequests--;
                    out.add(e.request);
                }
            }
        }
        return out;
    }

    /** Moves or removes every request whose queue deadline passed (caller holds the lock). */
    private void expire(long now, List<Entry> rejected) {
        Entry h;
        while ((h = deadlines.peek()) != null) {
            if (h.gone) {
                deadlines.poll();
                continue;
            }
            if (h.deadline > now) {
                break;
            }
            deadlines.poll();
            Level level = h.level;
            if (level.policy.timeoutAction() == TimeoutAction.DELAY) {
                if (level.main.remove(h)) {
                    h.delayed = true;
                    h.deadline = Long.MAX_VALUE;
                    level.delayed.addLast(h);
                }
            } else if ((h.delayed ? level.delayed : level.main).remove(h)) {
                h.gone = true;
                queuedRequests--;
                rejected.add(h);
            }
        }
        if (deadlines.size() > 2 * queuedRequests + 1024) {
            deadlines.removeIf(e -> e.gone);
        }
    }

    /** Answers rejected requests through the core (never under the lock). */
    private void reject(List<Entry> rejected) {
        for (Entry e : rejected) {
            ScheduledRequest r = e.request;
            BackplaneException error;
            if (e.oversize) {
                error = BackplaneException.invalid(r + " has batch size " + r.batchSize() + ", over what model '" + model + "' can execute");
            } else {
                long micros = queueTimeoutMicros(e.level.policy, r);
                error = new BackplaneException(ErrorCode.DEADLINE_EXCEEDED, r + " waited in the queue of model '" + model + "' longer than its queue timeout of "
                        + micros + " µs (priority level " + e.level.number + "); it was not executed");
            }
            try {
                context.reject(r, error);
            } catch (Throwable t) {
                log.error("the host failed to reject {} for the batcher of model '{}'", r, model, t);
            }
        }
    }

    /** Starts the timer thread if it is not running (caller holds the lock). */
    private void startTimer() {
        if (timer == null && !closed) {
            Thread t = Thread.ofPlatform().daemon().name("backplane-batcher-" + model + "-v" + context.version()).unstarted(this::runTimer);
            timer = t;
            t.start();
        }
    }

    private void runTimer() {
        List<Entry> rejected = new ArrayList<>();
        while (true) {
            lock.lock();
            try {
                if (closed) {
                    return;
                }
                long now = ticker.nanoTime();
                expire(now, rejected);
                if (rejected.isEmpty()) {
                    Entry h = deadlines.peek();
                    if (h == null) {
                        timerWake.await();
                    } else {
                        timerWake.awaitNanos(Math.min(MAX_WAIT_NANOS, h.deadline - now));
                    }
                    continue;
                }
            } catch (InterruptedException e) {
                continue; // close() interrupts only after setting closed
            } catch (Throwable t) {
                log.error("the queue timer of model '{}' failed; it goes on", model, t);
                continue;
            } finally {
                lock.unlock();
            }
            reject(rejected);
            rejected.clear();
        }
    }

    @Override
    public void cancelled(ScheduledRequest request) {
        int index = Math.clamp(request.priorityLevel(), 1, levels.length) - 1;
        Level level = levels[index];
        lock.lock();
        try {
            if (removeFrom(level.main, request) || removeFrom(level.delayed, request)) {
                queuedRequests--;
            }
        } finally {
            lock.unlock();
        }
    }

    private static boolean removeFrom(ArrayDeque<Entry> q, ScheduledRequest request) {
        for (Iterator<Entry> it = q.iterator(); it.hasNext();) {
            Entry e = it.next();
            if (e.request == request) {
                it.remove();
                e.gone = true;
                return true;
            }
        }
        return false;
    }

    @Override
    public List<ScheduledRequest> drain() {
        lock.lock();
        try {
            List<ScheduledRequest> out = new ArrayList<>(queuedRequests);
            for (Level level : levels) {
                for (ArrayDeque<Entry> q : List.of(level.main, level.delayed)) {
                    for (Entry e : q) {
                        e.gone = true;
                        out.add(e.request);
                    }
                    q.clear();
                }
            }
            deadlines.clear();
            queuedRequests = 0;
            return out;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public int queued() {
        lock.lock();
        try {
            return queuedRequests;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        Thread t;
        lock.lock();
        try {
            closed = true;
            work.signalAll();
            timerWake.signalAll();
            t = timer;
        } finally {
            lock.unlock();
        }
        if (t != null && t != Thread.currentThread()) {
            t.interrupt();
            try {
                t.join(TimeUnit.SECONDS.toMillis(2));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public String toString() {
        return "dynamic batcher of model '" + model + "' (" + queued() + " queued)";
    }
}
