package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.core.repository.FileRoot;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Model;
import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.host.ModelState;
import java.nio.channels.ClosedByInterruptException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The lifecycle of one loaded model version: load (backend model, batcher, instances; on failure
 * everything created so far closes), readiness, and the unload protocol. Owns L7's order of steps
 * and its deadline, and L8's "ready while at least one instance can serve".
 *
 * <p>Unload (L7): {@link Admission#beginUnload} stops admission; queued requests are withdrawn
 * and failed (or, for a reload whose new version serves, left to run until the deadline); the
 * unload waits on the holds until the deadline, fails what is still open naming the ids that
 * pinned the version, then closes the batcher, stops the workers and closes instances and model,
 * each close bounded ({@link Bounded}). Every request ends through its own one release
 * ({@link RequestState}), so a request the unload races ends once.
 *
 * <p>Instance counts may change while it serves ({@link #resize}: a load whose override changes only
 * counts, or the {@link Autoscale} policy, checked by its own thread): new slots start and join the
 * list; retiring ones finish their batch and close. Changes hold {@code scaling}; the list changes
 * under {@code slotsLock}, where an unload takes it over ({@code slotsClosed}): from then on the
 * unload finalizes every listed slot, and a change in progress (interrupted, waited for until the
 * unload's deadline) closes only what it started and never listed.
 *
 * <p>The parts: {@link Admission} (admission and holds), {@link BatchGuard} (the batcher),
 * {@link Placement} and {@link InstanceSlot} (instances), {@link VersionContext} and
 * {@link BatcherScope} (what backends and batchers see).
 */
final class ModelVersion {
    private static final Logger log = LoggerFactory.getLogger(ModelVersion.class);
    /** The longest the autoscaler waits between checks after its changes failed in a row. */
    private static final long AUTOSCALE_MAX_BACKOFF_MILLIS = 60_000;

    private final VersionContext context;
    private final HostContext host;
    private final Admission admission;
    /** Every slot not yet finalized, retiring ones included; changes only under {@link #scaling} and {@link #slotsLock}. */
    private final List<InstanceSlot> instances = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Where each slot runs (its group and device), for instance changes. */
    private final java.util.Map<InstanceSlot, Placement.Spec> specs = new java.util.concurrent.ConcurrentHashMap<>();
    /** Held by an instance change ({@link #resize}); unload waits for it, bounded, after interrupting it. */
    private final java.util.concurrent.locks.ReentrantLock scaling = new java.util.concurrent.locks.ReentrantLock();
    /** The thread changing the instances now, interrupted by an unload. */
    private volatile @Nullable Thread scaler;
    /** Guards {@link #slotsClosed}, {@link #reservedInstances} and changes of {@link #instances}. */
    private final Object slotsLock = new Object();
    /** Set once by unload: from then on the unload owns every slot in {@link #instances}; a change closes what it made itself. */
    private boolean slotsClosed;
    /** The next slot index and, per group, the next instance number in its names; under {@link #scaling}. */
    private int nextIndex;
    private final java.util.Map<Integer, Integer> nextNumber = new java.util.HashMap<>();
    /** Whether the instance count may change in place: the batcher does not bind work to instance indexes (dynamic, none). */
    private boolean elastic;
    /** Whether callers (caller-runs) and ensemble steps run inline on the slots (a model without a batcher). */
    private boolean callerRunsSlots;
    private boolean stepSlots;
    private long executeTimeout;
    /** The config with the instance counts it serves with now (the loaded one until a count changes). */
    private volatile ModelConfig current;
    private Autoscale.@Nullable Policy autoscale;
    private volatile boolean autoscaling;
    private @Nullable Thread autoscaler;
    /** When the autoscaler first saw the model idle in the current run of idle checks; -1: not idle. Under {@link #autoscaleOnce}'s lock. */
    private long idleSince = -1;
    private @Nullable Model model;
    private @Nullable BatchGuard batches;
    /** An ensemble's scheduler, in place of model, batcher and instances; null for other models. */
    private @Nullable EnsembleScheduler ensemble;
    private volatile String unavailableReason = "";
    /** How long the load took (backend model, batcher, instances), for listeners added later. */
    private long loadNanos;
    private final ChildRequests.SelfCalls selfCalls = new ChildRequests.SelfCalls();
    /** The custom metrics handed out through {@link VersionContext#metrics()}; closed when the version goes. */
    private final CustomMetrics.Scope metrics;
    /** Instances taken from the host's caps; given back once when the version ends. Under {@link #slotsLock}. */
    private int reservedInstances;
    /** Each limited instance's place in the host's rate limiter, closed when the version unloads or its load fails. */
    private final List<RateLimiter.Gate> rateLimiterGates = new ArrayList<>();

    /** The name of the backend that serves it. */
    String backendName() {
        return context.backend().backendName();
    }

    private ModelVersion(VersionContext context, CustomMetrics.Scope metrics, HostContext host, Classification classes) {
        this.context = context;
        this.metrics = metrics;
        this.host = host;
        ModelConfig config = context.config();
        this.current = config;
        boolean ordered = (config.dynamicBatching() != null && config.dynamicBatching().preserveOrdering()
                || config.sequenceBatching() != null && config.sequenceBatching().preserveOrdering()) && !config.decoupled();
        this.admission = new Admission(context.name(), context.version(), config, host, ordered ? new ResponseOrder() : null, classes);
    }

    /** The {@code execute_timeout_ms} model parameter: the execute watchdog (0 = off). */
    private static long executeTimeout(ModelConfig config) {
        String v = config.parameters().get("execute_timeout_ms");
        if (v == null || v.isBlank()) {
            return 0;
        }
        try {
            long ms = Long.parseLong(v.trim());
            if (ms < 0) {
                throw new NumberFormatException();
            }
            return ms;
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid("model '" + config.name() + "': parameter execute_timeout_ms is '" + v
                    + "'; give a whole number of milliseconds ≥ 0 (0 turns the watchdog off)");
        }
    }

    /**
     * Loads a version: the backend model, the batcher, then every instance. On any failure
     * everything created so far is closed and the cause is thrown. {@code files}: where the
     * model's files may really be (label and warm-up files, and what the backend checks through
     * {@link VersionContext#checkedFile}).
     */
    public static ModelVersion load(String name, long version, ModelConfig config, Path modelDirectory, FileRoot files, Backend backend,
            BackendContext backendContext, BatcherFactory batcherFactory, HostContext host) {
        return load(name, version, config, modelDirectory, files, backend, backendContext, batcherFactory, host,
                io.backplane.spi.BackendCapabilities.DEFAULT);
    }

    /**
     * As {@link #load(String, long, ModelConfig, Path, FileRoot, Backend, BackendContext, BatcherFactory, HostContext)};
     * {@code capabilities}: the backend's. Only when its models may not start child requests
     * ({@link io.backplane.spi.BackendCapabilities#childRequests()}) does a worker of another model
     * run this model's ensemble steps itself ({@link StepTrampoline}); only when their execute is
     * free of side effects do they get the built-in warm-up without asking (R1, {@link Warmup}).
     */
    public static ModelVersion load(String name, long version, ModelConfig config, Path modelDirectory, FileRoot files, Backend backend,
            BackendContext backendContext, BatcherFactory batcherFactory, HostContext host, io.backplane.spi.BackendCapabilities capabilities) {
        boolean childRequests = capabilities.childRequests();
        long started = System.nanoTime();
        long executeTimeout = executeTimeout(config);
        Classification classes = Classification.load(config, modelDirectory, files);
        List<Warmup.Sample> warmup = Warmup.of(config, modelDirectory, files, host.builtinWarmup(), capabilities.sideEffectFreeExecute());
        CustomMetrics.Scope metrics = host.customMetrics().scope("model '" + name + "' version " + version);
        ModelVersion v = new ModelVersion(new VersionContext(name, version, config, modelDirectory, files, backendContext, metrics), metrics, host, classes);
        List<InstanceSlot> callerRuns = List.of();
        List<InstanceSlot> stepSlots = List.of();
        try {
            List<Placement.Spec> placed = Placement.of(name, config);
            v.autoscale = Autoscale.of(config, host.limits().maxInstancesPerModel());
            host.reserveInstances(name, placed.size());
            v.reservedInstances = placed.size();
            v.executeTimeout = executeTimeout;
            String batcherName = batcherFactory.name();
            v.elastic = batcherName.equals("dynamic") || batcherName.equals("none");
            if (v.autoscale != null && !v.elastic) {
                throw BackplaneException.invalid("model '" + name + "': autoscaling (" + Autoscale.MIN + ", " + Autoscale.MAX + ") needs the 'dynamic' or 'none'"
                        + " batcher, whose instances take any request; this model uses '" + batcherName + "'; remove the autoscale_* parameters");
            }
            Model m = requireNonNull(backend.loadModel(v.context), "backend '" + backendContext.backendName() + "' returned a null model");
            v.model = m;
            Batcher batcher = requireNonNull(batcherFactory.create(new BatcherScope(config, version, placed.size(), host.ticker(), v.admission.origin(),
                    v.context.modelDirectory())),
                    "batcher '" + batcherFactory.name() + "' returned null");
            BatchGuard batches = new BatchGuard(v.admission.origin(), batcher, config.batches() ? config.maxBatchSize() : 1);
            v.batches = batches;
            for (Placement.Spec spec : placed) {
                InstanceSlot slot = new InstanceSlot(v.context, batches, host, executeTimeout, spec);
                v.instances.add(slot);
                slot.limitedBy(v.rateLimited(spec));
                v.specs.put(slot, spec);
                v.nextNumber.merge(spec.group(), 1, Integer::sum);
            }
            v.nextIndex = placed.size();
            startAll(name, v.instances, m);
            if (batcherFactory.name().equals("none")) {
                v.stepSlots = true;
                stepSlots = List.copyOf(v.instances);
                if (host.callerRuns()) {
                    v.callerRunsSlots = true;
                    callerRuns = stepSlots;
                }
            }
        } catch (Throwable t) {
            // a cancelled load (an unload or a shutdown interrupted it) still cleans up without interruption
            boolean interrupted = Thread.interrupted();
            try {
                v.abortLoad(t);
            } finally {
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
            if (interrupted || interruption(t)) {
                throw new BackplaneException(ErrorCode.CANCELLED, "the load of model '" + name + "' version " + version
                        + " was cancelled (the model was unloaded or the host is stopping)", t);
            }
            throw BackplaneException.wrap(t, "model '" + name + "' version " + version + " failed to load");
        }
        v.loadNanos = System.nanoTime() - started;
        v.admission.open(requireNonNull(v.batches), callerRuns, stepSlots, !childRequests, v.loadNanos);
        if (!warmup.isEmpty()) {
            // Before the registry publishes the version: no client sees it ready until its warm-up ran.
            try {
                Warmup.run(name, warmup, v::admit);
            } catch (BackplaneException e) {
                v.unload(host.unloadTimeout());
                throw e;
            }
            log.info("model '{}' version {}: {} warm-up sample(s) ran", name, version, warmup.size());
        }
        log.info("loaded model '{}' version {} ({} instance(s), backend '{}', batcher '{}')", name, version, v.instances.size(),
                backendContext.backendName(), batcherFactory.name());
        host.listener().instancesChanged(name, version, v.instances.size());
        v.startAutoscaler();
        return v;
    }

    /** At most this many instances of one version start at once (each on its own thread). */
    static int parallelStarts() {
        return Math.max(4, Runtime.getRuntime().availableProcessors());
    }

    /**
     * Starts every slot's first instance, at most {@link #parallelStarts()} at once: a Python stub
     * or a GPU context spends its start mostly waiting, so N instances take about as long as one.
     * Returns once every start ended. The first failure interrupts the starts still running and is
     * thrown, later ones suppressed; the caller then closes every slot, started or not.
     */
    private static void startAll(String name, List<InstanceSlot> slots, Model m) throws Exception {
        if (slots.size() == 1) {
            slots.getFirst().start(m);
            return;
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.min(slots.size(), parallelStarts()),
                Thread.ofPlatform().daemon().name("backplane-start-" + name + "-", 0).factory());
        Exception failure = null;
        var done = new ExecutorCompletionService<InstanceSlot>(pool);
        try (pool) { // close() waits for every start that began, so none is still running when the caller cleans up
            for (InstanceSlot slot : slots) {
                done.submit(() -> {
                    slot.start(m);
                    return slot;
                });
            }
            for (int i = 0; i < slots.size() && failure == null; i++) {
                try {
                    done.take().get();
                } catch (ExecutionException e) {
                    failure = e.getCause() instanceof Exception x ? x : new CompletionException(e.getCause());
                    pool.shutdownNow(); // the other starts are interrupted; those not begun never run
                } catch (InterruptedException e) {
                    pool.shutdownNow();
                    throw e;
                }
            }
        }
        if (failure != null) {
            // what the other starts that had begun threw, except the interruptions this method caused
            for (Future<InstanceSlot> f; (f = done.poll()) != null;) {
                try {
                    f.get();
                } catch (ExecutionException e) {
                    if (!interruption(e.getCause())) {
                        failure.addSuppressed(e.getCause());
                    }
                }
            }
            throw failure;
        }
    }

    /** Whether {@code t} comes from an interrupted wait (a cancelled load), wherever the backend wrapped it. */
    static boolean interruption(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof InterruptedException || c instanceof ClosedByInterruptException) {
                return true;
            }
        }
        return false;
    }

    private void releaseInstances() {
        int n;
        synchronized (slotsLock) {
            n = reservedInstances;
            reservedInstances = 0;
        }
        host.releaseInstances(n);
        List<RateLimiter.Gate> gates;
        synchronized (rateLimiterGates) {
            gates = List.copyOf(rateLimiterGates);
            rateLimiterGates.clear();
        }
        gates.forEach(RateLimiter.Gate::close);
    }

    /** Takes a retired or never-started slot out of the host's rate limiter (its resources stop counting). */
    private void closeGate(InstanceSlot slot) {
        RateLimiter.Gate g = slot.gate();
        if (g != null) {
            synchronized (rateLimiterGates) {
                rateLimiterGates.remove(g);
            }
            g.close();
        }
    }

    /**
     * Registers instance {@code spec} with the host's rate limiter: its gate, kept until the version
     * unloads, or null when the limiter does not hold it back.
     *
     * @throws BackplaneException INVALID_ARGUMENT when its resources cannot be served (see {@link RateLimiter#register})
     */
    RateLimiter.@Nullable Gate rateLimited(Placement.Spec spec) {
        RateLimiter.Gate g = host.rateLimiter().register(name(), version(), spec.name(), spec.deviceId(), spec.rateLimiter());
        if (g != null) {
            synchronized (rateLimiterGates) {
                rateLimiterGates.add(g);
            }
        }
        return g;
    }

    /** Sequence slots this version's batcher holds (0 without sequence batching, or after unload). */
    int sequenceSlotsInUse() {
        BatchGuard b = batches;
        return b == null ? 0 : b.sequenceSlotsInUse();
    }

    /**
     * Loads a version of an ensemble: no backend model, batcher or instance; admitted requests go
     * to the core's {@link EnsembleScheduler}, whose steps are child requests of theirs.
     */
    static ModelVersion loadEnsemble(String name, long version, ModelConfig config, Path modelDirectory, FileRoot files, EnsemblePlan plan,
            java.util.function.BooleanSupplier composingReady, HostContext host) {
        long started = System.nanoTime();
        Classification classes = Classification.load(config, modelDirectory, files);
        // an ensemble's steps may be models of any backend: its built-in warm-up runs only when its config asks for it
        List<Warmup.Sample> warmup = Warmup.of(config, modelDirectory, files, host.builtinWarmup(), false);
        CustomMetrics.Scope metrics = host.customMetrics().scope("model '" + name + "' version " + version);
        BackendContext none = new BackendContext() {
            @Override
            public String backendName() {
                return EnsembleScheduling.PLATFORM;
            }

            @Override
            public java.util.Map<String, String> options() {
                return java.util.Map.of();
            }

            @Override
            public Path workDirectory() {
                return modelDirectory;
            }

            @Override
            public int hostSpiVersion() {
                return io.backplane.spi.Spi.VERSION;
            }
        };
        ModelVersion v = new ModelVersion(new VersionContext(name, version, config, modelDirectory, files, none, metrics), metrics, host, classes);
        EnsembleScheduler scheduler = new EnsembleScheduler(plan, composingReady, host);
        v.ensemble = scheduler;
        v.loadNanos = System.nanoTime() - started;
        v.admission.openEnsemble(scheduler, v.loadNanos);
        if (!warmup.isEmpty()) {
            try {
                Warmup.run(name, warmup, v::admit); // through the steps: the composing models warm up too
            } catch (BackplaneException e) {
                v.unload(host.unloadTimeout());
                throw e;
            }
            log.info("ensemble '{}' version {}: {} warm-up sample(s) ran", name, version, warmup.size());
        }
        log.info("loaded ensemble '{}' version {} ({} step(s){})", name, version, plan.steps().size(), plan.decoupled() ? ", decoupled" : "");
        return v;
    }

    private void abortLoad(Throwable cause) {
        admission.closed();
        metrics.close();
        unavailableReason = String.valueOf(cause.getMessage());
        Duration limit = host.unloadTimeout();
        for (InstanceSlot s : instances) {
            s.stop();
        }
        for (InstanceSlot s : instances) {
            s.join(limit);
            s.closeInstance(limit);
        }
        BatchGuard b = batches;
        if (b != null) {
            Bounded.run("batcher-close-" + name(), limit, b::close);
        }
        Model m = model;
        if (m != null) {
            Bounded.run("model-close-" + name() + "-v" + version(), limit, m::close);
        }
        releaseInstances();
    }

    public String name() {
        return context.name();
    }

    /** How long this version took to load, in nanoseconds. */
    public long loadNanos() {
        return loadNanos;
    }

    public long version() {
        return context.version();
    }

    /** The config it serves with: the loaded one, with the instance counts of the last change in place ({@link #resize}). */
    public ModelConfig config() {
        return current;
    }

    /** The model's folder, where its config was read; empty for a model defined in code (no folder of its own). */
    public java.util.Optional<Path> modelDirectory() {
        Path d = context.modelDirectory();
        return Files.isDirectory(d) ? java.util.Optional.of(d) : java.util.Optional.empty();
    }

    public ModelState state() {
        return admission.state();
    }

    /** Ready: loaded, not unloading, and at least one instance can serve (L8). */
    public boolean isReady() {
        if (admission.state() != ModelState.READY) {
            return false;
        }
        EnsembleScheduler e = ensemble;
        if (e != null) {
            return e.composingReady();
        }
        for (InstanceSlot s : instances) {
            if (s.isReady()) {
                return true;
            }
        }
        return false;
    }

    /**
     * Ready as {@link #isReady()}, with each instance's own check ({@link InstanceSlot#checkReady()}):
     * ready when one of the instances says so. When none does and some gave a reason, logs it once
     * for this query as Triton does: {@code Model 'm' version v is not ready: <reason>}. Never fails.
     */
    public CompletableFuture<Boolean> checkReady() {
        if (admission.state() != ModelState.READY) {
            return CompletableFuture.completedFuture(false);
        }
        EnsembleScheduler e = ensemble;
        if (e != null) {
            return CompletableFuture.completedFuture(e.composingReady());
        }
        List<CompletableFuture<InstanceSlot.Verdict>> checks = new ArrayList<>();
        for (InstanceSlot s : instances) {
            checks.add(s.checkReady());
        }
        if (checks.isEmpty()) {
            return CompletableFuture.completedFuture(false);
        }
        CompletableFuture<Boolean> any = new CompletableFuture<>();
        AtomicInteger left = new AtomicInteger(checks.size());
        for (CompletableFuture<InstanceSlot.Verdict> c : checks) {
            c.thenAccept(v -> {
                if (v.ready()) {
                    any.complete(true);
                } else if (left.decrementAndGet() == 0) {
                    logNotReady(checks); // before the answer leaves: whoever reads the log after it finds the line
                    any.complete(false);
                }
            });
        }
        return any;
    }

    private void logNotReady(List<CompletableFuture<InstanceSlot.Verdict>> checks) {
        List<String> reasons = new ArrayList<>();
        for (CompletableFuture<InstanceSlot.Verdict> c : checks) {
            String r = c.join().reason();
            if (r != null && !r.isBlank()) {
                reasons.add(r);
            }
        }
        if (!reasons.isEmpty()) {
            log.info("Model '{}' version {} is not ready: {}", name(), version(), String.join("; ", reasons));
        }
    }

    /** Why the version is not ready, for the repository index. */
    public String reason() {
        if (admission.state() == ModelState.READY && !isReady()) {
            return ensemble != null ? "a composing model of the ensemble is not ready; load it" : "no instance is ready (restarting)";
        }
        return unavailableReason;
    }

    /** Ids of the open requests: the holds on this version. */
    public Set<Long> openRequestIds() {
        return admission.openIds();
    }

    /** Requests accepted and not yet ended (the autoscaler's sample; tests). */
    List<RequestState> openRequests() {
        return admission.openRequests();
    }

    /** The instances serving or finishing their work (a retiring one counts until it is finalized). */
    public int instanceCount() {
        return instances.size();
    }

    /**
     * Accepts a request ({@link Admission#admit}).
     *
     * @throws BackplaneException INVALID_ARGUMENT for a bad request, UNAVAILABLE when the version
     *     is not serving; the request was not accepted and the sink was not called
     */
    RequestState admit(InferenceRequest request, ResponseSink sink) {
        return admission.admit(request, sink);
    }

    // ---- instance counts changed while it serves ----

    /**
     * Whether a load of {@code next} can change this version in place ({@link #resize}): it
     * differs from the config it serves with only in instance-group counts, and its batcher hands
     * any request to any instance (dynamic, none).
     */
    boolean resizableTo(ModelConfig next) {
        return elastic && ensemble == null && admission.state() == ModelState.READY && Placement.countsOnly(current, next);
    }

    /**
     * Changes the instance counts to those of {@code next} ({@link #resizableTo}) while the version
     * serves: no new version, batcher or backend model; queued and running requests are untouched.
     * New instances start first (in parallel, as at load); one that fails to start is logged and
     * closed, and the others serve on. Then the instances to retire (of their group and device,
     * idle ones first, then the newest) take no new batch, finish the one they run and the streams
     * of a decoupled model they executed ({@link InstanceSlot#retire}), and are closed, each within
     * the unload timeout. Serialised with other changes and with the autoscaler's checks; an unload
     * interrupts a change in progress and waits for it at most until its own deadline.
     *
     * @throws BackplaneException INVALID_ARGUMENT or RESOURCE_EXHAUSTED over the instance caps or
     *     outside the autoscaling bounds (nothing changed); UNAVAILABLE when a new instance failed to start (the others were added
     *     and the model serves on), CANCELLED when an unload interrupted it
     */
    void resize(ModelConfig next) {
        scaling.lock();
        scaler = Thread.currentThread();
        try {
            resizeLocked(next);
        } finally {
            scaler = null;
            scaling.unlock();
        }
    }

    private void resizeLocked(ModelConfig next) {
        String name = name();
        Model m = requireNonNull(model, "model");
        BatchGuard b = requireNonNull(batches, "batches");
        if (admission.state() != ModelState.READY) {
            throw BackplaneException.unavailable("model '" + name + "' version " + version() + " is unloading; its instances cannot change");
        }
        List<io.backplane.spi.config.InstanceGroup> groups = Placement.groups(next);
        Autoscale.Policy p = autoscale;
        if (p != null) {
            int n = groups.getFirst().count();
            if (n < p.min() || n > p.max()) {
                throw BackplaneException.invalid("model '" + name + "': the instance_group count " + n + " is outside " + Autoscale.MIN + " " + p.min()
                        + " .. " + Autoscale.MAX + " " + p.max() + "; give a count from " + p.min() + " to " + p.max()
                        + ", or change those parameters (a change of them reloads the model)");
            }
        }
        int total = Placement.of(name, next).size();
        List<Placement.Spec> added = new ArrayList<>();
        List<InstanceSlot> retiring = new ArrayList<>();
        for (int g = 0; g < groups.size(); g++) {
            for (int device : Placement.devices(groups.get(g))) {
                List<InstanceSlot> here = new ArrayList<>();
                for (InstanceSlot slot : instances) {
                    Placement.Spec sp = specs.get(slot);
                    if (sp != null && sp.group() == g && sp.deviceId() == device) {
                        here.add(slot);
                    }
                }
                int want = groups.get(g).count();
                for (int i = here.size(); i < want; i++) {
                    int k = nextNumber.merge(g, 1, Integer::sum) - 1;
                    added.add(Placement.one(name, next, g, device, nextIndex++, k));
                }
                // idle ones first (a retirement then waits for nothing), the newest first among them
                here.sort(java.util.Comparator.comparing(InstanceSlot::isBusy)
                        .thenComparing(java.util.Comparator.comparingInt((InstanceSlot x) -> requireNonNull(specs.get(x)).index()).reversed()));
                retiring.addAll(here.subList(0, Math.max(0, here.size() - want)));
            }
        }
        int before = instances.size();
        if (!added.isEmpty()) {
            host.reserveInstances(name, total, added.size());
        }
        log.info("model '{}' version {}: instances change in place from {} to {} ({} to add, {} to retire)", name, version(), before, total,
                added.size(), retiring.size());
        List<InstanceSlot> fresh = new ArrayList<>();
        try {
            for (Placement.Spec spec : added) {
                InstanceSlot slot = new InstanceSlot(context, b, host, executeTimeout, spec);
                slot.limitedBy(rateLimited(spec)); // refused (nothing changes) when the limiter cannot serve its resources
                fresh.add(slot);
                specs.put(slot, spec);
            }
        } catch (RuntimeException e) {
            for (InstanceSlot slot : fresh) {
                closeGate(slot);
                specs.remove(slot);
            }
            host.releaseInstances(added.size());
            throw e;
        }
        List<Throwable> failures = startEach(fresh, m);
        List<InstanceSlot> started = new ArrayList<>();
        int refused = 0;
        for (InstanceSlot slot : fresh) {
            if (slot.isStarted()) {
                started.add(slot);
            } else {
                closeGate(slot);
                specs.remove(slot);
                refused++;
            }
        }
        boolean closed;
        synchronized (slotsLock) {
            closed = slotsClosed;
            if (!closed) {
                instances.addAll(started);
                reservedInstances += started.size();
            }
        }
        host.releaseInstances(closed ? added.size() : refused);
        if (closed) { // an unload took the slots meanwhile (it gave up waiting): what this change started is its own to close
            Duration limit = host.unloadTimeout();
            boolean interrupted = Thread.interrupted();
            for (InstanceSlot slot : started) {
                slot.retire(limit);
                closeGate(slot);
                specs.remove(slot);
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            throw new BackplaneException(ErrorCode.CANCELLED, "model '" + name + "' version " + version() + " was unloaded while its instances changed");
        }
        if (Thread.currentThread().isInterrupted()) { // an unload waits for this change: what started is in its hands now
            current = countsOf(next);
            host.listener().instancesChanged(name, version(), instances.size());
            throw new BackplaneException(ErrorCode.CANCELLED, "the instance change of model '" + name + "' version " + version()
                    + " was cancelled (the model is unloading or the host is stopping)");
        }
        List<InstanceSlot> serving = new ArrayList<>(instances);
        serving.removeAll(retiring);
        slotsChanged(serving);
        Duration limit = host.unloadTimeout();
        for (InstanceSlot slot : retiring) {
            if (!slot.retire(limit)) {
                break; // interrupted by an unload: it finalizes this slot and the others, still listed
            }
            boolean mine;
            synchronized (slotsLock) {
                mine = !slotsClosed && instances.remove(slot);
                if (mine) {
                    reservedInstances--;
                }
            }
            if (mine) {
                closeGate(slot);
                specs.remove(slot);
                host.releaseInstances(1);
            }
        }
        current = countsOf(next);
        host.listener().instancesChanged(name, version(), instances.size());
        log.info("model '{}' version {}: {} instance(s) now", name, version(), instances.size());
        if (Thread.currentThread().isInterrupted()) {
            throw new BackplaneException(ErrorCode.CANCELLED, "the instance change of model '" + name + "' version " + version()
                    + " was cancelled (the model is unloading or the host is stopping)");
        }
        if (!failures.isEmpty()) {
            Throwable first = failures.getFirst();
            BackplaneException e = BackplaneException.unavailable("model '" + name + "' version " + version() + ": " + failures.size() + " of the "
                    + added.size() + " new instance(s) failed to start (" + first.getMessage() + "); it serves on " + instances.size()
                    + " instance(s); see the server log, fix the cause and load again");
            failures.forEach(e::addSuppressed);
            throw e;
        }
    }

    private String slotName(InstanceSlot slot) {
        Placement.Spec sp = specs.get(slot);
        return sp == null ? "?" : sp.name();
    }

    /** {@code next} with the counts of the slots serving now (fewer than it asks where a start failed). */
    private ModelConfig countsOf(ModelConfig next) {
        List<io.backplane.spi.config.InstanceGroup> groups = next.instanceGroups();
        if (groups.isEmpty()) {
            return next;
        }
        List<io.backplane.spi.config.InstanceGroup> out = new ArrayList<>();
        for (int g = 0; g < groups.size(); g++) {
            int n = 0;
            for (InstanceSlot slot : instances) {
                Placement.Spec sp = specs.get(slot);
                if (sp != null && sp.group() == g) {
                    n++;
                }
            }
            int devices = Placement.devices(groups.get(g)).size();
            out.add(groups.get(g).toBuilder().count(Math.max(1, (n + devices - 1) / devices)).build());
        }
        return next.toBuilder().instanceGroups(out).build();
    }

    private void slotsChanged(List<InstanceSlot> serving) {
        if (stepSlots) {
            admission.slotsChanged(callerRunsSlots ? serving : List.of(), serving);
        }
    }

    /**
     * Starts each slot, at most {@link #parallelStarts()} at once; a start that fails is logged and
     * its slot closed. Returns the failures. Interrupted (an unload): the starts still running are
     * interrupted and every one has ended when it returns.
     */
    private List<Throwable> startEach(List<InstanceSlot> slots, Model m) {
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        if (slots.isEmpty()) {
            return failures;
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.min(slots.size(), parallelStarts()),
                Thread.ofPlatform().daemon().name("backplane-start-" + name() + "-", 0).factory());
        try (pool) { // close() waits for every start that began
            List<Future<?>> futures = new ArrayList<>();
            for (InstanceSlot slot : slots) {
                futures.add(pool.submit(() -> {
                    try {
                        slot.start(m);
                    } catch (Throwable t) {
                        if (interruption(t)) {
                            log.info("model '{}' version {}: the start of new instance '{}' was cancelled", name(), version(), slotName(slot));
                        } else {
                            log.warn("model '{}' version {}: new instance '{}' failed to start; the model serves on its other instances{}", name(),
                                    version(), slotName(slot), t instanceof BackplaneException be && be.logDetail() != null ? "\n" + be.logDetail() : "", t);
                        }
                        failures.add(t);
                        slot.closeInstance(host.unloadTimeout()); // its worker never started: close what was created
                    }
                }));
            }
            for (Future<?> f : futures) {
                try {
                    f.get();
                } catch (InterruptedException e) {
                    pool.shutdownNow();
                    Thread.currentThread().interrupt();
                    break;
                } catch (ExecutionException e) {
                    failures.add(e.getCause());
                }
            }
        }
        return failures;
    }

    /** The autoscaling policy in force, or null when the config sets none. */
    Autoscale.@Nullable Policy autoscalePolicy() {
        return autoscale;
    }

    private void startAutoscaler() {
        Autoscale.Policy p = autoscale;
        if (p == null) {
            return;
        }
        autoscaling = true;
        Thread t = Thread.ofPlatform().daemon().name("backplane-autoscale-" + name() + "-v" + version()).unstarted(() -> {
            int failed = 0; // changes failed in a row: the checks back off, and only the first is logged as a warning
            while (autoscaling) {
                try {
                    Thread.sleep(Math.min(AUTOSCALE_MAX_BACKOFF_MILLIS, p.intervalMillis() << Math.min(failed, 16)));
                } catch (InterruptedException e) {
                    continue; // an unload: the loop ends when autoscaling is off
                }
                try {
                    autoscaleOnce();
                    if (failed > 0) {
                        log.info("model '{}' version {}: the autoscaler's checks go on every {} ms again", name(), version(), p.intervalMillis());
                    }
                    failed = 0;
                } catch (Throwable x) {
                    if (!autoscaling) {
                        continue;
                    }
                    failed++;
                    if (failed == 1) {
                        log.warn("model '{}' version {}: an instance change by the autoscaler failed; it checks again less often until a change"
                                + " succeeds (at most every {} s)", name(), version(), AUTOSCALE_MAX_BACKOFF_MILLIS / 1000, x);
                    } else {
                        log.debug("model '{}' version {}: the autoscaler's change failed again ({} in a row)", name(), version(), failed, x);
                    }
                }
            }
        });
        autoscaler = t;
        t.start();
    }

    private void stopAutoscaler(Duration limit) {
        autoscaling = false;
        Thread t = autoscaler;
        if (t == null || t == Thread.currentThread()) {
            return;
        }
        t.interrupt();
        try {
            if (!t.join(limit)) {
                log.warn("model '{}' version {}: the autoscaler did not stop within {} ms", name(), version(), limit.toMillis());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * One autoscaler check: samples the queue and the instances, and adds or retires at most one
     * instance of the group as the policy says ({@link Autoscale#decide}). Returns +1, -1 or 0.
     * Called by the autoscaler's thread every interval (tests call it directly).
     */
    synchronized int autoscaleOnce() {
        Autoscale.Policy p = autoscale;
        BatchGuard b = batches;
        if (p == null || b == null || admission.state() != ModelState.READY) {
            return 0;
        }
        long now = host.ticker().nanoTime();
        long oldest = Long.MAX_VALUE;
        for (RequestState r : admission.openRequests()) {
            if (r.phase() == RequestState.QUEUED) {
                oldest = Math.min(oldest, r.arrivalNanos());
            }
        }
        scaling.lock(); // the count read, decided on and changed in one step: an operator's change is never undone
        scaler = Thread.currentThread();
        try {
            return autoscaleLocked(p, b, now, oldest);
        } finally {
            scaler = null;
            scaling.unlock();
        }
    }

    private int autoscaleLocked(Autoscale.Policy p, BatchGuard b, long now, long oldest) {
        if (admission.state() != ModelState.READY) {
            return 0;
        }
        int busy = 0;
        for (InstanceSlot slot : instances) {
            busy += slot.isBusy() ? 1 : 0;
        }
        ModelConfig c = current;
        int count = c.instanceGroups().isEmpty() ? 1 : c.instanceGroups().getFirst().count();
        int devices = c.instanceGroups().isEmpty() ? 1 : Placement.devices(c.instanceGroups().getFirst()).size();
        Autoscale.Sample sample = new Autoscale.Sample(b.queued(), oldest == Long.MAX_VALUE ? 0 : now - oldest, busy, instances.size() / Math.max(1, devices));
        if (Autoscale.idle(sample)) {
            if (idleSince < 0) {
                idleSince = now;
            }
        } else {
            idleSince = -1;
        }
        int step = Autoscale.decide(p, new Autoscale.Sample(sample.queued(), sample.oldestWaitNanos(), busy, count), now, idleSince);
        if (step == 0) {
            return 0;
        }
        idleSince = -1;
        ModelConfig next = c.instanceGroups().isEmpty()
                ? c.toBuilder().instanceGroup(Placement.groups(c).getFirst().toBuilder().count(count + step).build()).build()
                : c.toBuilder().instanceGroups(List.of(c.instanceGroups().getFirst().toBuilder().count(count + step).build())).build();
        log.info("model '{}' version {}: autoscaling from {} to {} instance(s) ({} queued, oldest waited {} µs, {} busy)", name(), version(), count,
                count + step, sample.queued(), sample.oldestWaitNanos() / 1000, busy);
        resizeLocked(next);
        return step;
    }

    // ---- unload (L7) ----

    /**
     * Unloads: stops admission, fails queued requests, waits for open ones up to the deadline,
     * fails what is left, then closes instances, batcher and model. Idempotent; returns within
     * the deadline plus the bounded close steps.
     */
    public void unload(Duration timeout) {
        unload(timeout, false);
    }

    /**
     * Unloads; with {@code drainQueued} (a reload whose new version already serves), queued
     * requests still run on this version until the deadline instead of failing at once.
     */
    public void unload(Duration timeout, boolean drainQueued) {
        if (!admission.beginUnload()) {
            return;
        }
        String name = name();
        long version = version();
        long deadline = System.nanoTime() + timeout.toNanos();
        autoscaling = false;
        log.info("unloading model '{}' version {} ({} open request(s))", name, version, admission.openIds().size());
        BackplaneException queuedError = BackplaneException.unavailable("model '" + name + "' version " + version
                + " is unloading; the request was still queued");
        BatchGuard b = batches; // null for an ensemble: nothing queues, its requests are running
        if (!drainQueued && b != null) {
            failQueued(b, queuedError);
        }
        admission.awaitDrained(deadline);
        if (drainQueued && b != null) {
            failQueued(b, queuedError);
            admission.awaitDrained(deadline);
        }
        if (!admission.isDrained()) {
            List<Long> pinned = admission.openIds().stream().sorted().toList();
            log.warn("unload of model '{}' version {}: the deadline of {} ms passed with {} request(s) still open, pinning the version: ids {}; failing them",
                    name, version, timeout.toMillis(), pinned.size(), pinned);
            BackplaneException e = BackplaneException.unavailable("model '" + name + "' version " + version
                    + " was unloaded before the request finished (unload deadline " + timeout.toMillis() + " ms)");
            for (RequestState r : admission.openRequests()) {
                r.terminate(e, Outcome.OTHER, "unload-deadline");
            }
        }
        boolean changeEnded = awaitInstanceChange(deadline);
        List<InstanceSlot> slots;
        synchronized (slotsLock) {
            slotsClosed = true; // from here an instance change in progress closes what it starts itself
            slots = List.copyOf(instances);
        }
        if (b != null) {
            b.close();
        }
        for (InstanceSlot slot : slots) {
            slot.stop();
        }
        Duration grace = Duration.ofNanos(Math.max(deadline - System.nanoTime(), Duration.ofSeconds(1).toNanos()));
        for (InstanceSlot slot : slots) {
            slot.join(grace);
            slot.closeInstance(grace);
        }
        if (changeEnded) {
            scaling.unlock();
        }
        Model m = model;
        if (m != null) {
            Bounded.run("model-close-" + name + "-v" + version, grace, m::close);
        }
        metrics.close();
        releaseInstances();
        admission.closed();
        unavailableReason = "unloaded";
        if (ensemble == null) {
            host.listener().instancesChanged(name, version, 0);
        }
        host.listener().versionUnloaded(name, version);
        log.info("unloaded model '{}' version {}", name, version);
    }

    /**
     * Stops the autoscaler and interrupts an instance change in progress, then waits for it until
     * {@code deadline} (at least a moment); true when this thread now holds {@link #scaling}.
     */
    private boolean awaitInstanceChange(long deadline) {
        stopAutoscaler(Duration.ofNanos(Math.max(deadline - System.nanoTime(), Duration.ofMillis(100).toNanos())));
        Thread t = scaler;
        if (t != null && t != Thread.currentThread()) {
            t.interrupt();
        }
        try {
            if (scaling.tryLock(Math.max(deadline - System.nanoTime(), Duration.ofMillis(100).toNanos()), java.util.concurrent.TimeUnit.NANOSECONDS)) {
                return true;
            }
            log.warn("unload of model '{}' version {}: an instance change did not end by the deadline; unloading without it", name(), version());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return false;
    }

    /** Withdraws and fails every request still queued: those the batcher hands back, then any other not yet dispatched. */
    private void failQueued(BatchGuard b, BackplaneException queuedError) {
        for (RequestState r : b.drain()) {
            if (r.tryWithdraw()) {
                r.terminate(queuedError, Outcome.OTHER, "unload-queued");
            }
        }
        for (RequestState r : admission.openRequests()) {
            if (r.phase() == RequestState.QUEUED && r.tryWithdraw()) {
                r.terminate(queuedError, Outcome.OTHER, "unload-queued");
            }
        }
    }

    /** What requests of this version carry; a child's ancestors are compared by it (C2). */
    RequestState.Origin origin() {
        return admission.origin();
    }

    ChildRequests.SelfCalls selfCalls() {
        return selfCalls;
    }

    @Override
    public String toString() {
        return context.toString();
    }
}
