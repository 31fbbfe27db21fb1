package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.Ticker;
import io.backplane.spi.host.HostListener;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Host-wide state shared by every model version, fixed when the host is built: the clock, the
 * lifecycle options and the host's services — the request id counter (B7), the listeners, the
 * watchdog timer and the count of suppressed second releases (L4).
 *
 * <p>Immutable: every field is final and set by the constructor. What changes while the host
 * runs lives in thread-safe services the fields point to (a counter, {@link Listeners},
 * {@link Watchdog}); no setter changes a host option after models loaded with it.
 */
public final class HostContext {
    private static final Logger log = LoggerFactory.getLogger(HostContext.class);

    private final AtomicLong requestIds = new AtomicLong();
    private final LongAdder duplicateReleases = new LongAdder();
    private final Ticker ticker;
    private final Listeners listeners;
    private final Statistics statistics = new Statistics();
    private final Watchdog watchdog = new Watchdog();
    private final Duration unloadTimeout;
    private final Duration restartBackoffMin;
    private final Duration restartBackoffMax;
    private final boolean callerRuns;
    private final boolean builtinWarmup;
    private final RateLimiter rateLimiter;
    private final CustomMetrics customMetrics = new CustomMetrics();
    private volatile @org.jspecify.annotations.Nullable ModelRegistry registry;
    private final @org.jspecify.annotations.Nullable ResponseCache responseCache;
    private final HostOptions.Limits limits;
    private final MemoryBudget memory;
    private final java.util.concurrent.atomic.AtomicInteger instances = new java.util.concurrent.atomic.AtomicInteger();

    public HostContext(Ticker ticker, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax, List<HostListener> initial,
            boolean callerRuns) {
        this(ticker, unloadTimeout, restartBackoffMin, restartBackoffMax, initial, callerRuns, 0, HostOptions.Limits.defaults());
    }

    /** As the other constructor, with a response cache of {@code responseCacheBytes} (0: none). */
    public HostContext(Ticker ticker, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax, List<HostListener> initial,
            boolean callerRuns, long responseCacheBytes) {
        this(ticker, unloadTimeout, restartBackoffMin, restartBackoffMax, initial, callerRuns, responseCacheBytes, HostOptions.Limits.defaults());
    }

    /** As the other constructors, with the host's bounds ({@link HostOptions.Limits}). */
    public HostContext(Ticker ticker, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax, List<HostListener> initial,
            boolean callerRuns, long responseCacheBytes, HostOptions.Limits limits) {
        this(ticker, unloadTimeout, restartBackoffMin, restartBackoffMax, initial, callerRuns, responseCacheBytes, limits, false);
    }

    /** As the other constructors; {@code builtinWarmup}: the default of the built-in warm-up ({@link Warmup}) for models that set none. */
    public HostContext(Ticker ticker, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax, List<HostListener> initial,
            boolean callerRuns, long responseCacheBytes, HostOptions.Limits limits, boolean builtinWarmup) {
        this(ticker, unloadTimeout, restartBackoffMin, restartBackoffMax, initial, callerRuns, responseCacheBytes, limits, builtinWarmup,
                RateLimiter.Settings.OFF);
    }

    /** As the other constructors; {@code rateLimiter}: the host's rate limiter ({@link RateLimiter}). */
    public HostContext(Ticker ticker, Duration unloadTimeout, Duration restartBackoffMin, Duration restartBackoffMax, List<HostListener> initial,
            boolean callerRuns, long responseCacheBytes, HostOptions.Limits limits, boolean builtinWarmup, RateLimiter.Settings rateLimiter) {
        this.rateLimiter = new RateLimiter(rateLimiter);
        this.builtinWarmup = builtinWarmup;
        this.responseCache = responseCacheBytes > 0 ? new ResponseCache(responseCacheBytes) : null;
        this.ticker = requireNonNull(ticker, "ticker is null");
        this.unloadTimeout = requireNonNull(unloadTimeout, "unloadTimeout is null");
        this.restartBackoffMin = requireNonNull(restartBackoffMin, "restartBackoffMin is null");
        this.restartBackoffMax = requireNonNull(restartBackoffMax, "restartBackoffMax is null");
        this.listeners = new Listeners(initial);
        this.listeners.add(statistics);
        this.callerRuns = callerRuns;
        this.limits = requireNonNull(limits, "limits is null");
        this.memory = new MemoryBudget(limits.memoryBudgetBytes());
    }

    /** The host's bounds. */
    public HostOptions.Limits limits() {
        return limits;
    }

    /** The host-wide memory budget of requests (O1). */
    public MemoryBudget memory() {
        return memory;
    }

    /**
     * Takes {@code count} instances of the per-model and per-host caps for a version of {@code model}
     * about to load (O2); {@link #releaseInstances} gives them back when it unloads or fails.
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT above the per-model cap,
     *     RESOURCE_EXHAUSTED when the host has no room left
     */
    void reserveInstances(String model, int count) {
        reserveInstances(model, count, count);
    }

    /**
     * As {@link #reserveInstances(String, int)} for a model that will run {@code total} instances,
     * {@code count} of them new (its count raised while it serves): the per-model cap applies to
     * {@code total}, the host's to the {@code count} taken now.
     */
    void reserveInstances(String model, int total, int count) {
        if (total > limits.maxInstancesPerModel()) {
            throw io.backplane.spi.BackplaneException.invalid("model '" + model + "' asks for " + total + " instances (instance_group count), over the limit of "
                    + limits.maxInstancesPerModel() + " per model; lower the count, or raise the limit (embedded builder maxInstancesPerModel, "
                    + "backplane serve --max-instances-per-model)");
        }
        while (true) {
            int now = instances.get();
            if (count > limits.maxInstancesPerHost() - now) {
                throw new io.backplane.spi.BackplaneException(io.backplane.spi.ErrorCode.RESOURCE_EXHAUSTED, "model '" + model + "' asks for " + count
                        + (count == total ? "" : " more") + " instances but the host runs " + now + " of its limit of " + limits.maxInstancesPerHost() + "; unload a model, lower the "
                        + "count, or raise the limit (embedded builder maxInstancesPerHost, backplane serve --max-instances-per-host)");
            }
            if (instances.compareAndSet(now, now + count)) {
                return;
            }
        }
    }

    void releaseInstances(int count) {
        instances.addAndGet(-count);
    }

    /** The host-wide response cache, or null when the host has none. */
    public @org.jspecify.annotations.Nullable ResponseCache responseCache() {
        return responseCache;
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

    public long nextRequestId() {
        return requestIds.incrementAndGet();
    }

    public Ticker ticker() {
        return ticker;
    }

    /** The listener that fans out to every registered one, guarding each. */
    public HostListener listener() {
        return listeners;
    }

    /** The statistics the core keeps per model version (Triton's statistics extension). */
    public Statistics statistics() {
        return statistics;
    }

    public void addListener(HostListener l) {
        listeners.add(l);
    }

    /** Whether models without {@code model_warmup} or the {@code builtin_warmup} parameter get the built-in warm-up ({@link Warmup}). */
    public boolean builtinWarmup() {
        return builtinWarmup;
    }

    /** The host-wide rate limiter (Triton's {@code --rate-limit}); off unless the host options turn it on. */
    public RateLimiter rateLimiter() {
        return rateLimiter;
    }

    /** Whether models without batching may execute on the caller's thread when an instance is idle. */
    public boolean callerRuns() {
        return callerRuns;
    }

    /** The host's execute watchdog timer. */
    Watchdog watchdog() {
        return watchdog;
    }

    /** Stops the watchdog thread. */
    public void close() {
        watchdog.close();
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
        listeners.duplicateReleaseSuppressed(model, version);
    }

    /** How many second releases were suppressed since the host started (L4). */
    public long duplicateReleases() {
        return duplicateReleases.sum();
    }
}
