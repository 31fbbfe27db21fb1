package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One model instance: supervises a sequence of stub generations. A stub that dies (or is killed
 * after a stall) is replaced with a capped exponential backoff; the instance is not ready while
 * no healthy stub serves. The first replacement after a death starts when its backoff
 * ({@code restart_backoff_initial_ms}, 2.5 s by default: long enough for a readiness probe to see
 * the outage, as Triton reports a dead stub's instance NOT READY) has passed, or at once when a
 * request for this instance arrives, whichever comes first; that request waits for it (up to the
 * start-up timeout). A monitor thread runs heartbeats and the execute watchdog while there is
 * work, and parks without a timeout when idle.
 */
final class PythonInstance implements ModelInstance, StubConnection.Owner {
    private static final Logger log = LoggerFactory.getLogger(PythonInstance.class);
    private static final long TICK_NANOS = 10_000_000;
    /** The least wait between restart attempts (a cap set lower still waits this long after a failed start). */
    private static final long BACKOFF_FLOOR_MILLIS = 100;

    private enum State { STARTING, READY, RESTARTING, CLOSED }

    private final PythonModel model;
    private final InstanceContext context;
    private final StubSettings settings;
    private final AtomicInteger generations = new AtomicInteger();
    private final Object lock = new Object();
    private volatile State state = State.STARTING;
    private volatile @Nullable StubConnection stub;
    private volatile String lastFailure = "";
    private final Thread monitor;
    private volatile long monitorRounds; // written by the monitor thread only
    /** Set by the monitor just before it parks without a timeout; whoever clears it unparks it. */
    private final AtomicBoolean monitorAsleep = new AtomicBoolean();
    private final LongAdder monitorWakeups = new LongAdder();
    private volatile long monitorIdleParks; // written by the monitor thread only
    private volatile long monitorParkReturns; // written by the monitor thread only
    private @Nullable Thread restarter;
    /** A request arrived while the first restart after a death waited out its backoff: start it now. Guarded by lock. */
    private boolean restartWanted;

    private PythonInstance(PythonModel model, InstanceContext context) {
        this.model = model;
        this.context = context;
        this.settings = model.settings();
        this.monitor = Thread.ofPlatform().daemon().name("backplane-python-monitor-" + model.name() + "-" + context.name())
                .unstarted(this::monitorLoop);
    }

    static PythonInstance start(PythonModel model, InstanceContext context) {
        PythonInstance i = new PythonInstance(model, context);
        i.stub = i.newStub();
        i.state = State.READY;
        i.monitor.start();
        return i;
    }

    private StubConnection newStub() {
        StubConnection s = new StubConnection(this, generations.incrementAndGet(), settings, model.name(), context.name(),
                model.context().config().decoupled());
        s.start(model.backend().stubDirectory(), model.backend().socketDirectory(), model.initJson(context));
        return s;
    }

    @Override
    public io.backplane.spi.metrics.@Nullable MetricRegistry metrics() {
        try {
            return model.context().metrics();
        } catch (UnsupportedOperationException e) {
            return null;
        }
    }

    /** The current stub (tests and diagnostics). */
    @Nullable StubConnection currentStub() {
        return stub;
    }

    @Override
    public boolean isReady() {
        StubConnection s = stub;
        return state == State.READY && s != null && !s.isDead() && !s.isStalled();
    }

    /**
     * The model's {@code is_ready()} when it defines one (Triton's python_backend user-defined
     * readiness), else ready while the stub is healthy; see {@link StubReadiness}.
     */
    @Override
    public java.util.concurrent.CompletionStage<Boolean> checkReady() {
        StubConnection s = stub;
        if (s == null || !isReady()) {
            return java.util.concurrent.CompletableFuture.failedFuture(BackplaneException.unavailable(notHealthyForReadiness()));
        }
        return s.checkReady().thenCompose(ready -> ready ? java.util.concurrent.CompletableFuture.completedFuture(true)
                : java.util.concurrent.CompletableFuture.failedFuture(BackplaneException.unavailable(
                        "Model '" + context.name() + "' is not ready (user-defined check failed).")));
    }

    /**
     * Why a readiness query finds this instance not ready: Triton's sentence (the host logs it as
     * "Model 'm' version v is not ready: ..."), then what Backplane does about it.
     */
    private String notHealthyForReadiness() {
        State st = state;
        StubConnection c = stub;
        String doing = st == State.CLOSED ? "the instance is closed"
                : st == State.RESTARTING ? "its python stub restarts after its backoff or at the next request"
                        + (lastFailure.isEmpty() ? "" : "; it ended: " + lastFailure)
                : c != null && c.isStalled() ? "its python stub (pid " + c.pid() + ") is stalled and being recovered or replaced"
                : "its python stub is starting";
        return "Stub process '" + context.name() + "' is not healthy. (Backplane: " + doing + ")";
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        StubConnection s = awaitServing();
        if (s == null) {
            StubConnection c = stub;
            String why = state == State.CLOSED ? "is closed"
                    : c != null && c.isStalled() ? "has a stalled python stub (pid " + c.pid() + ") that is being recovered or replaced"
                    : "is restarting its python stub" + (lastFailure.isEmpty() ? "" : " after: " + lastFailure);
            BackplaneException err = BackplaneException.unavailable(notHealthy(why));
            for (ScheduledRequest sr : batch) {
                try {
                    sr.sender().sendError(err);
                } catch (RuntimeException e) {
                    log.debug("request {} had already ended", sr.id(), e);
                }
            }
            return;
        }
        s.execute(batch);
    }

    /** Triton's sentence for a request to an instance whose stub cannot serve, then Backplane's hint. */
    private String notHealthy(String why) {
        return "Stub process '" + context.name() + "' is not healthy. (Backplane: model '" + model.name() + "' instance '" + context.name()
                + "' " + why + "; the model is not ready until it serves again, and the request can be retried)";
    }

    /**
     * Waits (up to the start-up timeout) while a replacement stub starts, asking a restart that
     * still waits out its backoff to start at once; null when none can serve now.
     */
    private @Nullable StubConnection awaitServing() {
        long deadline = System.nanoTime() + settings.startupTimeoutMillis() * 1_000_000;
        synchronized (lock) {
            if (state == State.RESTARTING && !restartWanted) {
                restartWanted = true;
                lock.notifyAll();
            }
            while (true) {
                StubConnection s = stub;
                if (state == State.CLOSED) {
                    return null;
                }
                if (state == State.READY && s != null && !s.isDead()) {
                    return s.isStalled() ? null : s;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null;
                }
                try {
                    lock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return null;
                }
            }
        }
    }

    @Override
    public void readinessChanged() {
        synchronized (lock) {
            lock.notifyAll();
        }
    }

    /**
     * Wakes the monitor only when it parked without a timeout: one that already watches work ticks
     * on its own within {@value #TICK_NANOS} ns, and an unpark per execution would make every
     * request pay a thread wake-up on a busy machine (issue 16).
     */
    @Override
    public void workStarted() {
        if (monitorAsleep.get() && monitorAsleep.compareAndSet(true, false)) {
            monitorWakeups.increment();
            LockSupport.unpark(monitor);
        }
    }

    /** Why its last stub ended or failed to start ("" when none did): what a restart reports (tests). */
    String lastFailure() {
        return lastFailure;
    }

    @Override
    public void onStubExit(StubConnection s, String reason) {
        synchronized (lock) {
            if (state == State.CLOSED || s != stub) {
                return;
            }
            state = State.RESTARTING;
            restartWanted = false;
            lastFailure = "python stub (pid " + s.pid() + ", generation " + s.generation() + ") " + reason;
            log.warn("model '{}' instance '{}': {}; restarting it", model.name(), context.name(), lastFailure);
            Thread t = Thread.ofPlatform().daemon().name("backplane-python-restart-" + model.name() + "-" + context.name())
                    .unstarted(this::restartLoop);
            restarter = t;
            t.start();
            lock.notifyAll();
        }
    }

    private void restartLoop() {
        long cap = Math.max(BACKOFF_FLOOR_MILLIS, settings.restartBackoffMaxMillis());
        long backoff = Math.max(BACKOFF_FLOOR_MILLIS, Math.min(settings.restartBackoffInitialMillis(), cap));
        boolean first = true;
        while (state != State.CLOSED) {
            try {
                if (first) {
                    awaitBackoffOrRequest(backoff);
                } else {
                    Thread.sleep(backoff);
                }
            } catch (InterruptedException e) {
                return;
            }
            first = false;
            if (state == State.CLOSED) {
                return;
            }
            try {
                StubConnection s = newStub();
                synchronized (lock) {
                    if (state == State.CLOSED) {
                        s.shutdown();
                        return;
                    }
                    stub = s;
                    state = State.READY;
                    lock.notifyAll();
                }
                LockSupport.unpark(monitor);
                log.info("model '{}' instance '{}': python stub restarted (generation {})", model.name(), context.name(), s.generation());
                return;
            } catch (RuntimeException e) {
                if (state == State.CLOSED || Thread.currentThread().isInterrupted()) {
                    return;
                }
                lastFailure = e.getMessage();
                backoff = Math.min(backoff * 2, cap);
                log.warn("model '{}' instance '{}': python stub restart failed; next try in {} ms{}", model.name(), context.name(), backoff,
                        e instanceof BackplaneException be && be.logDetail() != null ? "\n" + be.logDetail() : "", e);
            }
        }
    }

    /** The first wait after a death: until its backoff has passed or a request for this instance arrived. */
    private void awaitBackoffOrRequest(long backoffMillis) throws InterruptedException {
        long deadline = System.nanoTime() + backoffMillis * 1_000_000;
        boolean asked;
        synchronized (lock) {
            while (!restartWanted && state != State.CLOSED) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                lock.wait(Math.max(1, left / 1_000_000));
            }
            asked = restartWanted;
        }
        if (asked) {
            log.info("model '{}' instance '{}': a request arrived; restarting its python stub now", model.name(), context.name());
        }
    }

    /** Monitor rounds run so far (tests: an idle instance runs none). */
    long monitorRounds() {
        return monitorRounds;
    }

    /** Times {@link #workStarted} unparked the monitor (tests: never more than its idle parks). */
    long monitorWakeups() {
        return monitorWakeups.sum();
    }

    /** Times the monitor, finding no work to watch, set out to park without a timeout. */
    long monitorIdleParks() {
        return monitorIdleParks;
    }

    /** Times the monitor came back from a park without a timeout (tests). */
    long monitorParkReturns() {
        return monitorParkReturns;
    }

    /** Whether the monitor is parked without a timeout (it has no work to watch). */
    boolean monitorIdle() {
        return monitor.getState() == Thread.State.WAITING;
    }

    private void monitorLoop() {
        while (state != State.CLOSED) {
            monitorRounds++;
            StubConnection s = stub;
            boolean busy = false;
            try {
                busy = s != null && s.tick(System.nanoTime());
            } catch (RuntimeException e) {
                log.warn("model '{}' instance '{}': monitor round failed", model.name(), context.name(), e);
            }
            if (busy) {
                LockSupport.parkNanos(TICK_NANOS);
                continue;
            }
            monitorIdleParks++;
            monitorAsleep.set(true);
            // Work posted before the flag was up did not unpark us: look again before parking
            // (both sides write, then read, volatile state, so one of them sees the other).
            if (s != null && s.hasWork() || state == State.CLOSED) {
                monitorAsleep.set(false);
                continue;
            }
            LockSupport.park();
            monitorParkReturns++;
            monitorAsleep.set(false);
        }
    }

    @Override
    public void close() {
        Thread r;
        synchronized (lock) {
            if (state == State.CLOSED) {
                return;
            }
            state = State.CLOSED;
            r = restarter;
            lock.notifyAll();
        }
        if (r != null) {
            r.interrupt();
            join(r);
        }
        LockSupport.unpark(monitor);
        join(monitor);
        StubConnection s = stub;
        if (s != null) {
            s.shutdown();
        }
    }

    private static void join(Thread t) {
        try {
            t.join(30_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
