package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.HostListener;
import io.backplane.spi.Ticker;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Host-wide state shared by every model version: the request id counter (B7), the clock, the
 * listeners and the lifecycle options.
 */
public final class HostContext {
    private static final Logger log = LoggerFactory.getLogger(HostContext.class);

    private final AtomicLong requestIds = new AtomicLong();
    private final LongAdder duplicateReleases = new LongAdder();
    private final Ticker ticker;
    private final List<HostListener> listeners = new CopyOnWriteArrayList<>();
    private final HostListener listener;
    private final Duration unloadTimeout;
    private final Duration restartBackoffMin;
    private final Duration restartBackoffMax;
    private volatile boolean callerRuns;
    private final CustomMetrics customMetrics = new CustomMetrics();
    private volatile @org.jspecify.annotations.Nullable ModelRegistry registry;

    public HostContext(Ticker ticker, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax, List<HostListener> initial) {
        this.ticker = requireNonNull(ticker, "ticker is null");
        this.unloadTimeout = requireNonNull(unloadTimeout, "unloadTimeout is null");
        this.restartBackoffMin = requireNonNull(restartBackoffMin, "restartBackoffMin is null");
        this.restartBackoffMax = requireNonNull(restartBackoffMax, "restartBackoffMax is null");
        this.listeners.addAll(initial);
        this.listener = new FanOut(listeners);
    }

    public long nextRequestId() {
        return requestIds.incrementAndGet();
    }

    public Ticker ticker() {
        return ticker;
    }

    /** The listener that fans out to every registered one, guarding each. */
    public HostListener listener() {
        return listener;
    }

    public void addListener(HostListener l) {
        listeners.add(requireNonNull(l, "listener is null"));
    }

    /** The host-wide custom metric families (ModelContext.metrics()). */
    public CustomMetrics customMetrics() {
        return customMetrics;
    }

    /** The registry child requests (BLS) are admitted through; set once by the registry. */
    ModelRegistry registry() {
        return requireNonNull(registry, "no model registry is attached to this host");
    }

    void registry(ModelRegistry r) {
        registry = r;
    }

    /** Whether models without batching may execute on the caller's thread when an instance is idle. */
    public boolean callerRuns() {
        return callerRuns;
    }

    public void callerRuns(boolean on) {
        callerRuns = on;
    }

    private java.util.concurrent.@org.jspecify.annotations.Nullable ScheduledExecutorService watchdog;

    /** The host's watchdog timer thread (backplane-watchdog), created on first use. */
    public synchronized java.util.concurrent.ScheduledExecutorService watchdog() {
        if (watchdog == null) {
            java.util.concurrent.ScheduledThreadPoolExecutor w = new java.util.concurrent.ScheduledThreadPoolExecutor(1,
                    r -> Thread.ofPlatform().daemon().name("backplane-watchdog").unstarted(r));
            w.setRemoveOnCancelPolicy(true);
            watchdog = w;
        }
        return watchdog;
    }

    /** Stops the watchdog thread. */
    public synchronized void close() {
        if (watchdog != null) {
            watchdog.shutdownNow();
            watchdog = null;
        }
    }

    public Duration unloadTimeout() {
        return unloadTimeout;
    }

    public Duration restartBackoffMin() {
        return restartBackoffMin;
    }

    public Duration restartBackoffMax() {
        return restartBackoffMax;
    }

    /** Counts a suppressed second release (L4). */
    void duplicateRelease(String model, long version, long requestId, String path) {
        duplicateReleases.increment();
        log.debug("suppressed a second release of request #{} (model '{}' version {}) via {}", requestId, model, version, path);
        listener.duplicateReleaseSuppressed(model, version);
    }

    /** How many second releases were suppressed since the host started (L4). */
    public long duplicateReleases() {
        return duplicateReleases.sum();
    }

    private record FanOut(List<HostListener> targets) implements HostListener {
        private void each(java.util.function.Consumer<HostListener> call) {
            for (HostListener l : targets) {
                try {
                    call.accept(l);
                } catch (RuntimeException e) {
                    log.warn("host listener {} failed", l, e);
                }
            }
        }

        @Override
        public void requestAccepted(String model, long version) {
            each(l -> l.requestAccepted(model, version));
        }

        @Override
        public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
            each(l -> l.requestEnded(model, version, outcome, queueNanos, computeNanos));
        }

        @Override
        public void requestRejected(String model, Outcome outcome) {
            each(l -> l.requestRejected(model, outcome));
        }

        @Override
        public void batchExecuted(String model, long version, int requests, int batchSize) {
            each(l -> l.batchExecuted(model, version, requests, batchSize));
        }

        @Override
        public void instanceRestarted(String model, long version, String instance) {
            each(l -> l.instanceRestarted(model, version, instance));
        }

        @Override
        public void duplicateReleaseSuppressed(String model, long version) {
            each(l -> l.duplicateReleaseSuppressed(model, version));
        }
    }
}
