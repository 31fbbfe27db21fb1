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
 * <p>The parts: {@link Admission} (admission and holds), {@link BatchGuard} (the batcher),
 * {@link Placement} and {@link InstanceSlot} (instances), {@link VersionContext} and
 * {@link BatcherScope} (what backends and batchers see).
 */
final class ModelVersion {
    private static final Logger log = LoggerFactory.getLogger(ModelVersion.class);

    private final VersionContext context;
    private final HostContext host;
    private final Admission admission;
    private final List<InstanceSlot> instances = new ArrayList<>();
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
    /** Instances taken from the host's caps; given back once when the version ends. */
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
            host.reserveInstances(name, placed.size());
            v.reservedInstances = placed.size();
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
            }
            startAll(name, v.instances, m);
            if (batcherFactory.name().equals("none")) {
                stepSlots = List.copyOf(v.instances);
                if (host.callerRuns()) {
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
        int n = reservedInstances;
        reservedInstances = 0;
        host.releaseInstances(n);
        List<RateLimiter.Gate> gates;
        synchronized (rateLimiterGates) {
            gates = List.copyOf(rateLimiterGates);
            rateLimiterGates.clear();
        }
        gates.forEach(RateLimiter.Gate::close);
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

    public ModelConfig config() {
        return context.config();
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
        if (b != null) {
            b.close();
        }
        for (InstanceSlot slot : instances) {
            slot.stop();
        }
        Duration grace = Duration.ofNanos(Math.max(deadline - System.nanoTime(), Duration.ofSeconds(1).toNanos()));
        for (InstanceSlot slot : instances) {
            slot.join(grace);
            slot.closeInstance(grace);
        }
        Model m = model;
        if (m != null) {
            Bounded.run("model-close-" + name + "-v" + version, grace, m::close);
        }
        metrics.close();
        releaseInstances();
        admission.closed();
        unavailableReason = "unloaded";
        host.listener().versionUnloaded(name, version);
        log.info("unloaded model '{}' version {}", name, version);
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
