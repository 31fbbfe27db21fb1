package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.InstanceKind;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One instance of a model version and the worker thread that feeds it. Owns L5 and L6 (what
 * {@code execute} leaves open is failed here, only the still-open requests), L8 (incarnations,
 * failure reports, restarts with capped backoff, the execute watchdog) and "{@code execute} is
 * never concurrent on one instance".
 *
 * <p>The worker pulls a batch from its {@link BatchSource} only when its instance is free, so
 * requests that arrive while it executes join the next batch; a caller running inline claims the
 * same {@code busy} flag; {@code execute} is therefore never concurrent on one instance. Each
 * created instance is an <em>incarnation</em> with its own generation: a failure reported by an
 * old incarnation never kills its replacement (L8). Restarts back off exponentially between the
 * host's minimum and maximum.
 *
 * <p>The slot knows its version only through the narrow {@link BatchSource}, the SPI
 * {@link ModelContext} it hands to its instances, and two facts of the config.
 */
final class InstanceSlot {
    private static final Logger log = LoggerFactory.getLogger(InstanceSlot.class);
    private static final long POLL_MILLIS = 100;
    /** How long the host waits for an instance's own readiness check (the SPI's bound). */
    static final long CHECK_READY_SECONDS = 30;
    /** A step whose executes average under this may run on another model's worker (about a loaded machine's wake-up). */
    private static final long QUICK_NANOS = TimeUnit.MICROSECONDS.toNanos(50);

    /**
     * Where a worker gets its work: requests already checked and dispatched, each exactly once
     * (B1, B2, B8). Implemented by {@link BatchGuard}.
     */
    interface BatchSource {
        /** The next batch for instance {@code instance}, waiting up to {@code timeout}; empty when none formed. May throw what the batcher threw. */
        List<RequestState> next(int instance, long timeout, TimeUnit unit) throws InterruptedException;

        /** An executed request asked to run again: queue it back in the batcher (it ended with an error if that fails). */
        default void reschedule(RequestState r) {
            r.terminate(BackplaneException.unavailable(r.describe() + " asked to be rescheduled, which this model's batcher does not do"),
                    Outcome.OTHER, "reschedule-unsupported");
        }

        /** Instance {@code instance} failed: the batcher ends what it keeps for it (sequence slots). */
        default void instanceFailed(int instance) {
        }

        /** Caller-runs: dispatches {@code r} alone; false if it already ended or was taken. */
        boolean dispatch(RequestState r);

        /** Takes queued {@code r} back from the batcher for a caller that runs it ({@link Joinable}); false when it cannot. */
        default boolean withdraw(RequestState r) {
            return false;
        }

        /** Whether nothing is queued. */
        boolean isIdle();
    }

    private final ModelContext owner;
    private final BatchSource source;
    private final HostContext host;
    private final boolean decoupled;
    private final long executeTimeoutMillis;
    private final String name;
    private final int index;
    private final InstanceKind kind;
    private final int deviceId;
    private final AtomicLong generation = new AtomicLong();
    private final AtomicLong failedGeneration = new AtomicLong(-1);
    private volatile @Nullable ModelInstance instance;
    private volatile List<RequestState> executing = List.of();
    private volatile boolean running = true;
    /**
     * Set with {@code running} false by {@link #retire}: the worker takes no new batch but still
     * runs the one it took, waiting for its rate-limiter resources if it must; {@link #stop} (an
     * unload) clears it, and then a waiting batch ends at once.
     */
    private volatile boolean retiring;
    /** Requests of a decoupled model still streaming from this instance after their execute returned. */
    private final AtomicInteger streams = new AtomicInteger();
    /** Held by whoever executes on this instance: the worker, or a caller running inline (caller-runs). */
    private final java.util.concurrent.atomic.AtomicBoolean busy = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile @Nullable Thread worker;
    /** A moving average of this instance's execute times, starting high: a worker lends its thread only to a quick step. */
    private volatile long recentExecuteNanos = TimeUnit.SECONDS.toNanos(1);
    private @Nullable Model model;
    /** Its place in the host's rate limiter; null when the limiter does not hold it back. Set before {@link #start}. */
    private volatile RateLimiter.@Nullable Gate gate;

    InstanceSlot(ModelContext owner, BatchSource source, HostContext host, long executeTimeoutMillis, Placement.Spec spec) {
        this.owner = requireNonNull(owner, "owner is null");
        this.source = requireNonNull(source, "source is null");
        this.host = requireNonNull(host, "host is null");
        this.decoupled = owner.config().decoupled();
        this.executeTimeoutMillis = executeTimeoutMillis;
        this.name = spec.name();
        this.index = spec.index();
        this.kind = spec.kind();
        this.deviceId = spec.deviceId();
    }

    /**
     * The rate limiter's hook ({@link RateLimiter}): once set, the worker waits for this gate's
     * resources after it takes a batch and returns them when the execute ends, and no caller runs
     * inline on this instance. Called before {@link #start}.
     */
    void limitedBy(RateLimiter.@Nullable Gate g) {
        gate = g;
    }

    /** Its rate-limiter gate, null when none holds it back. */
    RateLimiter.@Nullable Gate gate() {
        return gate;
    }

    /** Rate limiter: the worker has no batch to run, so it drops any claim on resources. */
    private void dropClaim() {
        RateLimiter.Gate g = gate;
        if (g != null) {
            g.idle();
        }
    }

    /** Creates the first incarnation (failure fails the load) and starts the worker. */
    void start(Model model) throws Exception {
        this.model = model;
        instance = create();
        Thread t = Thread.ofPlatform().daemon().name("backplane-" + owner.name() + "-v" + owner.version() + "-" + name).unstarted(this::work);
        worker = t;
        t.start();
    }

    private ModelInstance create() throws Exception {
        Incarnation inc = new Incarnation(generation.incrementAndGet());
        return requireNonNull(requireNonNull(model, "model").createInstance(inc), "createInstance returned null for instance '" + name + "'");
    }

    /** Whether its executes have lately been shorter than a thread wake-up costs (see {@link StepTrampoline}). */
    boolean isQuick() {
        return recentExecuteNanos < QUICK_NANOS;
    }

    boolean isReady() {
        ModelInstance i = instance;
        if (i == null || failedGeneration.get() == generation.get()) {
            return false;
        }
        try {
            return i.isReady();
        } catch (Throwable t) {
            return false;
        }
    }

    /** A readiness answer: ready, or not, with the instance's reason when it gave one. */
    record Verdict(boolean ready, @Nullable String reason) {
        static final Verdict READY = new Verdict(true, null);
        static final Verdict NOT_READY = new Verdict(false, null);
    }

    /**
     * The instance's own readiness check ({@link ModelInstance#checkReady()}) with the cheap one:
     * ready when both say so. The check is asked also when the cheap one says no, so that the
     * instance can say why (a stage failed with a {@link BackplaneException}: its message is the
     * reason). Never fails: what the plugin throws or fails the stage with counts as not ready.
     */
    CompletableFuture<Verdict> checkReady() {
        ModelInstance i = instance;
        if (i == null || failedGeneration.get() == generation.get()) {
            return CompletableFuture.completedFuture(Verdict.NOT_READY);
        }
        boolean cheap = isReady();
        CompletionStage<Boolean> stage;
        try {
            stage = i.checkReady();
        } catch (UnsupportedOperationException e) {
            return CompletableFuture.completedFuture(cheap ? Verdict.READY : Verdict.NOT_READY);
        } catch (Throwable t) {
            log.debug("instance '{}' of {}: checkReady threw", name, owner, t);
            return CompletableFuture.completedFuture(Verdict.NOT_READY);
        }
        if (stage == null) {
            return CompletableFuture.completedFuture(Verdict.NOT_READY);
        }
        return stage.toCompletableFuture()
                .handle((ready, t) -> t == null ? (cheap && Boolean.TRUE.equals(ready) ? Verdict.READY : Verdict.NOT_READY)
                        : new Verdict(false, reason(t)))
                .completeOnTimeout(Verdict.NOT_READY, CHECK_READY_SECONDS, TimeUnit.SECONDS);
    }

    private @Nullable String reason(Throwable t) {
        Throwable c = t instanceof java.util.concurrent.CompletionException && t.getCause() != null ? t.getCause() : t;
        if (c instanceof BackplaneException) {
            return c.getMessage();
        }
        log.debug("instance '{}' of {}: its readiness check failed", name, owner, c);
        return null;
    }

    private boolean needsRestart() {
        return failedGeneration.get() == generation.get() || instance == null;
    }

    /** An incarnation reported failure (any thread): fail its executing requests, mark it for restart. */
    private void failed(long gen, Throwable cause) {
        if (gen != generation.get()) {
            log.debug("instance '{}' of {}: ignoring a failure report from stale generation {}", name, owner, gen);
            return;
        }
        long f;
        do {
            f = failedGeneration.get();
            if (f >= gen) {
                return; // already reported for this incarnation (idempotent)
            }
        } while (!failedGeneration.compareAndSet(f, gen));
        log.warn("instance '{}' of {} failed (generation {}); it will be restarted", name, owner, gen, cause);
        BackplaneException e = BackplaneException.unavailable("instance '" + name + "' of model '" + owner.name() + "' failed: "
                + (cause.getMessage() == null ? cause.getClass().getName() : cause.getMessage()));
        for (RequestState r : executing) {
            if (!r.isClosed()) {
                r.terminate(e, Outcome.BACKEND, "instance-failure"); // the backend failed them (Triton: reason BACKEND)
            }
        }
        source.instanceFailed(index);
    }

    private void work() {
        try {
            workLoop();
        } finally {
            dropClaim(); // a claim staged as the last execute ended: nobody uses it any more
        }
    }

    private void workLoop() {
        int failures = 0;
        while (running) {
            if (needsRestart()) {
                dropClaim();
                claim(); // no caller runs on the incarnation being replaced
                try {
                    failures = restart(failures);
                } finally {
                    busy.set(false);
                }
                continue;
            }
            List<RequestState> batch;
            RateLimiter.Gate g = gate;
            try {
                // a rate-limiter claim made as the last execute ended only takes a batch already formed
                batch = source.next(index, g != null && g.claimed() ? 0 : POLL_MILLIS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                if (!running) {
                    break;
                }
                continue;
            } catch (Throwable t) {
                log.error("the batcher of {} threw from nextBatch; the worker of instance '{}' goes on", owner, name, t);
                dropClaim();
                sleepQuietly(10);
                continue;
            }
            if (batch.isEmpty()) {
                dropClaim();
                continue;
            }
            List<RequestState> taken = g == null ? batch : g.acquire(batch, () -> running || retiring); // rate limiter: wait for the resources
            if (taken.isEmpty()) {
                continue; // every request of the batch ended while it waited, or the slot stops: nothing held
            }
            ModelInstance i = instance;
            if (i == null || needsRestart()) {
                dropClaim();
                BackplaneException e = BackplaneException.unavailable("instance '" + name + "' of model '" + owner.name() + "' is restarting");
                for (RequestState r : taken) {
                    r.terminate(e, Outcome.OTHER, "instance-restarting");
                }
                continue;
            }
            if (taken.size() == 1) {
                // ensemble steps made ready by this request may run on this thread after it (StepTrampoline); a
                // larger batch hands them over at once, so early answers of the batch do not wait for its end
                StepTrampoline.run(source::isIdle, () -> claimAndExecute(i, taken));
            } else {
                claimAndExecute(i, taken);
            }
        }
    }

    private void claimAndExecute(ModelInstance i, List<RequestState> batch) {
        claim();
        try {
            execute(i, batch);
        } finally {
            busy.set(false);
            RateLimiter.Gate g = gate;
            if (g != null) {
                g.executed(running && !source.isIdle()); // resources back; with work queued, the instance is staged again at once
            }
        }
    }

    /** The worker waits for a caller running inline to finish (caller-runs, or a caller helping its own request). */
    private void claim() {
        for (int i = 0; i < 200; i++) {
            if (busy.compareAndSet(false, true)) {
                return; // an inline run of a quick model ends within a few spins
            }
            Thread.onSpinWait();
        }
        while (!busy.compareAndSet(false, true)) {
            java.util.concurrent.locks.LockSupport.parkNanos(20_000);
        }
    }

    /**
     * Caller-runs: executes {@code r} on the calling thread when this instance is idle and ready.
     * Returns false (and does nothing) when it is not.
     */
    boolean tryRunInline(RequestState r) {
        if (gate != null || !busy.compareAndSet(false, true)) { // a rate-limited instance runs only on its worker
            return false;
        }
        try {
            ModelInstance i = instance;
            if (i == null || needsRestart() || !running) {
                return false;
            }
            if (!source.dispatch(r)) {
                return true; // cancelled meanwhile: it has ended
            }
            execute(i, List.of(r));
            return true;
        } finally {
            busy.set(false);
        }
    }

    /**
     * A caller blocking on queued {@code r} runs it here ({@link Joinable}) when this instance is
     * idle and the batcher gives the request back; false (and nothing done) otherwise. The
     * instance is claimed first, so a worker that has just taken {@code r} keeps it.
     */
    boolean tryHelp(RequestState r) {
        if (executeTimeoutMillis > 0 || decoupled || gate != null || busy.get() || !busy.compareAndSet(false, true)) {
            return false; // an execute timeout interrupts the running thread: never a caller's
        }
        try {
            ModelInstance i = instance;
            if (i == null || needsRestart() || !running || !source.withdraw(r)) {
                return false;
            }
            if (source.dispatch(r)) {
                execute(i, List.of(r));
            }
            return true;
        } finally {
            busy.set(false);
        }
    }

    private void execute(ModelInstance i, List<RequestState> batch) {
        executing = batch;
        List<ScheduledRequest> view = Collections.unmodifiableList(batch);
        java.util.concurrent.ScheduledFuture<?> watchdog = null;
        long limit = executeTimeoutMillis;
        if (limit > 0) {
            long gen = generation.get();
            Thread runner = Thread.currentThread();
            watchdog = host.watchdog().schedule(() -> {
                if (executing == batch) {
                    failed(gen, new java.util.concurrent.TimeoutException("execute did not return within the execute_timeout_ms of " + limit + " ms"));
                    runner.interrupt();
                }
            }, limit);
        }
        StepTrampoline steps = StepTrampoline.executeStarted();
        long started = System.nanoTime();
        try {
            i.execute(view);
        } catch (Throwable t) {
            BackplaneException e = t instanceof BackplaneException be ? be
                    : BackplaneException.wrap(t, "model '" + owner.name() + "' instance '" + name + "' failed to execute");
            if (!(t instanceof BackplaneException)) {
                log.warn("instance '{}' of {} threw from execute; failing the open requests of its batch", name, owner, t);
            }
            for (RequestState r : batch) {
                if (!r.isClosed()) {
                    r.terminate(e, Outcome.BACKEND, "execute-threw");
                }
            }
            if (t instanceof InterruptedException || Thread.interrupted()) {
                if (running) {
                    Thread.currentThread().interrupt();
                }
            }
        } finally {
            StepTrampoline.executeEnded(steps);
            long recent = recentExecuteNanos;
            recentExecuteNanos = recent - (recent >> 3) + ((System.nanoTime() - started) >> 3); // racy average: a heuristic
            executing = List.of();
            if (watchdog != null) {
                watchdog.cancel(false);
                Thread.interrupted(); // an interrupt aimed at this execute must not leak into the next
            }
        }
        if (decoupled) {
            for (RequestState r : batch) {
                if (r.takeReschedule()) {
                    source.reschedule(r);
                } else if (!r.isClosed()) {
                    streams.incrementAndGet(); // it streams on from this instance: a retirement waits for it
                    r.whenClosed(this::streamEnded);
                }
            }
        } else {
            for (RequestState r : batch) {
                if (!r.isClosed()) {
                    r.terminate(BackplaneException.internal("model '" + owner.name() + "' instance '" + name + "' returned from execute without answering "
                            + r.describe() + "; a model that is not decoupled must send one response with FINAL for every request"),
                            Outcome.BACKEND, "missing-response");
                }
            }
        }
    }

    private int restart(int failures) {
        closeInstance(host.unloadTimeout());
        Duration min = host.restartBackoffMin();
        Duration max = host.restartBackoffMax();
        long delay = Math.min(max.toMillis(), min.toMillis() << Math.min(failures, 20));
        sleepQuietly(delay);
        if (!running) {
            return failures;
        }
        try {
            ModelInstance created = create();
            log.info("instance '{}' of {} restarted (generation {})", name, owner, generation.get());
            // told before it serves: whoever sees the model ready again has seen the restart event
            host.listener().instanceRestarted(owner.name(), owner.version(), name);
            synchronized (this) { // an unload or retirement that closed the slot meanwhile does not see this incarnation
                if (running) {
                    instance = created;
                    created = null;
                }
            }
            if (created != null) {
                Bounded.run("instance-close-" + name, host.unloadTimeout(), created::close);
                return failures;
            }
            return 0;
        } catch (Throwable t) {
            log.warn("instance '{}' of {} failed to restart (attempt {}); retrying in up to {} ms{}", name, owner, failures + 1, max.toMillis(),
                    t instanceof BackplaneException be && be.logDetail() != null ? "\n" + be.logDetail() : "", t);
            instance = null;
            return failures + 1;
        }
    }

    private void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            if (running) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void streamEnded() {
        if (streams.decrementAndGet() == 0) {
            synchronized (streams) {
                streams.notifyAll();
            }
        }
    }

    /** Stops the worker (an unload): a batch waiting for rate-limiter resources ends at once. */
    void stop() {
        retiring = false;
        running = false;
    }

    /** Waits for the worker to leave; interrupts it if it is still inside execute at the end. */
    void join(Duration limit) {
        Thread t = worker;
        if (t == null || t == Thread.currentThread()) {
            return;
        }
        try {
            if (!t.join(limit)) {
                log.warn("instance '{}' of {} is still executing after the unload deadline; interrupting it", name, owner);
                t.interrupt();
                t.join(Duration.ofMillis(200));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Closes the current incarnation, if any, within {@code limit}. Idempotent. */
    void closeInstance(Duration limit) {
        ModelInstance i;
        synchronized (this) { // a retirement and an unload racing close it once
            i = instance;
            instance = null;
        }
        if (i != null) {
            Bounded.run("instance-close-" + name, limit, i::close);
        }
    }

    // ---- instance counts changed at run time (ModelVersion.resize) ----

    /** Whether {@link #start} succeeded: its worker runs (or ran). */
    boolean isStarted() {
        return worker != null;
    }

    /**
     * Whether the instance is executing now (its worker, or a caller running inline) or a decoupled
     * request it executed still streams: the autoscaler's sample, and a retirement takes idle
     * instances first.
     */
    boolean isBusy() {
        return busy.get() || streams.get() > 0;
    }

    /**
     * Retires this slot when its model's instance count is lowered while it serves: the worker
     * takes no new batch, finishes the one it runs (its senders released on FINAL as always; a
     * batch waiting for rate-limiter resources waits on and runs), and leaves; a caller running
     * inline on it finishes too; the decoupled requests it executed finish their streams; then the
     * instance is closed. A worker still executing after {@code limit} is interrupted, and streams
     * still open then end when the instance closes, as at unload. Returns false, with the
     * instance left open, when the calling thread is interrupted first (an unload, which then
     * finalizes the slot itself). Called by the one thread that owns the retirement.
     */
    boolean retire(Duration limit) {
        retiring = true; // before running turns false: a batch waiting for its resources never sees both false
        running = false;
        long deadline = System.nanoTime() + limit.toNanos();
        Thread t = worker;
        try {
            if (t != null && t != Thread.currentThread() && !t.join(limit)) {
                log.warn("retiring instance '{}' of {}: still executing after {} ms; interrupting it", name, owner, limit.toMillis());
                t.interrupt();
                t.join(Duration.ofMillis(200));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        // a caller running inline finishes first; tryRunInline and tryHelp see !running from now on
        boolean claimed;
        while (!(claimed = busy.compareAndSet(false, true)) && System.nanoTime() - deadline < 0) {
            if (Thread.currentThread().isInterrupted()) {
                return false;
            }
            java.util.concurrent.locks.LockSupport.parkNanos(20_000);
        }
        try {
            if (!awaitStreams(deadline)) {
                return false;
            }
            closeInstance(limit);
        } finally {
            if (claimed) {
                busy.set(false);
            }
        }
        return true;
    }

    /** Waits until no decoupled request streams from this instance, or the deadline; false when interrupted. */
    private boolean awaitStreams(long deadline) {
        synchronized (streams) {
            long left;
            while (streams.get() > 0 && (left = deadline - System.nanoTime()) > 0) {
                try {
                    TimeUnit.NANOSECONDS.timedWait(streams, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
        if (streams.get() > 0) {
            log.warn("retiring instance '{}' of {}: {} decoupled request(s) still streaming at the deadline end as it closes", name, owner, streams.get());
        }
        return true;
    }

    private final class Incarnation implements InstanceContext {
        private final long gen;

        Incarnation(long gen) {
            this.gen = gen;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public int index() {
            return index;
        }

        @Override
        public InstanceKind kind() {
            return kind;
        }

        @Override
        public int deviceId() {
            return deviceId;
        }

        @Override
        public ModelContext model() {
            return owner;
        }

        @Override
        public void reportFailure(Throwable cause) {
            failed(gen, requireNonNull(cause, "cause is null"));
        }
    }
}
