package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One loaded model version: its backend model, batcher, instances, and the holds of its open
 * requests.
 *
 * <p>Admission and unload race through a Dekker-style handshake: {@link #admit} registers the
 * hold first and then reads the state; {@link #unload} writes the state first and then scans
 * the holds. Either the request sees UNLOADING and withdraws, or unload sees its hold and ends
 * it — no request slips past an unload (L7).
 */
public final class ModelVersion implements ModelContext {
    private static final Logger log = LoggerFactory.getLogger(ModelVersion.class);

    private final String name;
    private final long version;
    private final ModelConfig config;
    private final Path modelDirectory;
    private final Path versionDirectory;
    private final BackendContext backendContext;
    private final HostContext host;
    private final AtomicReference<ModelState> state = new AtomicReference<>(ModelState.LOADING);
    private final Map<Long, RequestState> open = new ConcurrentHashMap<>();
    private final Object drained = new Object();
    private final List<InstanceSlot> instances = new ArrayList<>();
    private final int maxBatch;
    private final boolean decoupled;
    private final @Nullable ResponseOrder order;
    private final @Nullable ReentrantLock dispatchLock;
    private @Nullable Model model;
    private @Nullable Batcher batcher;
    private volatile String unavailableReason = "";
    /** Execute on the caller's thread when an instance is idle (host option, none batcher only). */
    private boolean callerRuns;
    private final long executeTimeoutMillis;

    private ModelVersion(String name, long version, ModelConfig config, Path modelDirectory, BackendContext backendContext, HostContext host) {
        this.name = requireNonNull(name, "name is null");
        this.version = version;
        this.config = requireNonNull(config, "config is null");
        this.modelDirectory = requireNonNull(modelDirectory, "modelDirectory is null");
        this.versionDirectory = modelDirectory.resolve(Long.toString(version));
        this.backendContext = requireNonNull(backendContext, "backendContext is null");
        this.host = requireNonNull(host, "host is null");
        this.maxBatch = config.batches() ? config.maxBatchSize() : 1;
        this.decoupled = config.decoupled();
        boolean ordered = config.dynamicBatching() != null && config.dynamicBatching().preserveOrdering() && !decoupled;
        this.order = ordered ? new ResponseOrder() : null;
        this.dispatchLock = ordered ? new ReentrantLock() : null;
        this.executeTimeoutMillis = executeTimeout(config);
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

    long executeTimeoutMillis() {
        return executeTimeoutMillis;
    }

    /**
     * Loads a version: the backend model, the batcher, then every instance. On any failure
     * everything created so far is closed and the cause is thrown.
     */
    public static ModelVersion load(String name, long version, ModelConfig config, Path modelDirectory, Backend backend,
            BackendContext backendContext, BatcherFactory batcherFactory, HostContext host) {
        ModelVersion v = new ModelVersion(name, version, config, modelDirectory, backendContext, host);
        try {
            v.model = requireNonNull(backend.loadModel(v), "backend '" + backendContext.backendName() + "' returned a null model");
            v.batcher = requireNonNull(batcherFactory.create(v.new Context()), "batcher '" + batcherFactory.name() + "' returned null");
            int index = 0;
            List<InstanceGroup> groups = config.instanceGroups().isEmpty()
                    ? List.of(InstanceGroup.of("", 1, InstanceKind.AUTO, List.of())) : config.instanceGroups();
            for (int g = 0; g < groups.size(); g++) {
                InstanceGroup group = groups.get(g);
                String groupName = group.name().isEmpty() ? name + "_" + g : group.name();
                List<Integer> devices = group.kind() == InstanceKind.GPU ? (group.gpus().isEmpty() ? List.of(0) : group.gpus()) : List.of(0);
                InstanceKind kind = group.kind() == InstanceKind.AUTO ? InstanceKind.CPU : group.kind();
                int k = 0;
                for (int device : devices) {
                    for (int c = 0; c < group.count(); c++) {
                        InstanceSlot slot = new InstanceSlot(v, groupName + "_" + k++, index++, kind, device);
                        v.instances.add(slot);
                        slot.start(v.model);
                    }
                }
            }
        } catch (Throwable t) {
            v.abortLoad(t);
            throw BackplaneException.wrap(t, "model '" + name + "' version " + version + " failed to load");
        }
        v.callerRuns = host.callerRuns() && batcherFactory.name().equals("none");
        v.state.set(ModelState.READY);
        log.info("loaded model '{}' version {} ({} instance(s), backend '{}', batcher '{}')", name, version, v.instances.size(),
                backendContext.backendName(), batcherFactory.name());
        return v;
    }

    private void abortLoad(Throwable cause) {
        state.set(ModelState.UNAVAILABLE);
        unavailableReason = String.valueOf(cause.getMessage());
        Duration limit = host.unloadTimeout();
        for (InstanceSlot s : instances) {
            s.stop();
        }
        for (InstanceSlot s : instances) {
            s.join(limit);
            s.closeInstance(limit);
        }
        if (batcher != null) {
            Batcher b = batcher;
            Bounded.run("batcher-close-" + name, limit, b::close);
        }
        if (model != null) {
            Model m = model;
            Bounded.run("model-close-" + name + "-v" + version, limit, m::close);
        }
    }

    // ---- ModelContext ----

    @Override
    public String name() {
        return name;
    }

    @Override
    public long version() {
        return version;
    }

    @Override
    public ModelConfig config() {
        return config;
    }

    @Override
    public Path modelDirectory() {
        return modelDirectory;
    }

    @Override
    public Path versionDirectory() {
        return versionDirectory;
    }

    @Override
    public BackendContext backend() {
        return backendContext;
    }

    // ---- state ----

    HostContext host() {
        return host;
    }

    boolean decoupled() {
        return decoupled;
    }

    int maxBatch() {
        return maxBatch;
    }

    /** The reorder stage, or null when the model does not preserve ordering (the fast path). */
    @Nullable ResponseOrder order() {
        return order;
    }

    /**
     * Held by an instance worker around taking and guarding a batch when the model preserves
     * ordering, so that slots are reserved in the order batches leave the batcher; null otherwise.
     */
    @Nullable ReentrantLock dispatchLock() {
        return dispatchLock;
    }

    Batcher batcher() {
        return requireNonNull(batcher, "batcher");
    }

    public ModelState state() {
        return state.get();
    }

    /** Ready: loaded, not unloading, and at least one instance can serve (L8). */
    public boolean isReady() {
        if (state.get() != ModelState.READY) {
            return false;
        }
        for (InstanceSlot s : instances) {
            if (s.isReady()) {
                return true;
            }
        }
        return false;
    }

    /** Why the version is not ready, for the repository index. */
    public String reason() {
        if (state.get() == ModelState.READY && !isReady()) {
            return "no instance is ready (restarting)";
        }
        return unavailableReason;
    }

    /** Ids of the open requests: the holds on this version. */
    public Set<Long> openRequestIds() {
        return Set.copyOf(open.keySet());
    }

    public int instanceCount() {
        return instances.size();
    }

    // ---- requests ----

    /**
     * Accepts a request: validates it, registers its hold, queues it.
     *
     * @throws BackplaneException INVALID_ARGUMENT for a bad request, UNAVAILABLE when the version
     *     is not serving; the request was not accepted and the sink was not called
     */
    public RequestState admit(InferenceRequest request, ResponseSink sink) {
        int batchSize = RequestValidator.validate(config, request);
        request = Reshape.toBackend(config, request);
        int level = priorityLevel(request);
        RequestState r = new RequestState(host.nextRequestId(), request, this, sink, batchSize, level, host.ticker().nanoTime());
        open.put(r.id(), r);
        if (state.get() != ModelState.READY) {
            open.remove(r.id());
            throw new BackplaneException(ErrorCode.UNAVAILABLE, "model '" + name + "' version " + version + " is "
                    + (state.get() == ModelState.UNLOADING ? "unloading" : "not available") + "; retry once it is loaded");
        }
        host.listener().requestAccepted(name, version);
        if (callerRuns && requireNonNull(batcher, "batcher").queued() == 0) {
            for (InstanceSlot slot : instances) {
                if (slot.tryRunInline(r)) {
                    return r;
                }
            }
        }
        try {
            requireNonNull(batcher, "batcher").enqueue(r);
        } catch (Throwable t) {
            if (r.tryWithdraw()) {
                BackplaneException e = t instanceof BackplaneException be ? be
                        : BackplaneException.wrap(t, "the batcher of model '" + name + "' failed to queue " + r.describe());
                r.terminate(e, Outcome.REJECTED, "enqueue-rejected");
            }
        }
        return r;
    }

    private int priorityLevel(InferenceRequest request) {
        var db = config.dynamicBatching();
        int levels = db == null ? 0 : db.priorityLevels();
        if (levels == 0) {
            return 1;
        }
        int p = request.priority();
        if (p == 0) {
            return db.defaultPriorityLevel();
        }
        if (p > levels) {
            throw BackplaneException.invalid("model '" + name + "' has priority levels 1.." + levels + " but the request asked for priority " + p);
        }
        return p;
    }

    /** Called by {@link RequestState} exactly once per request, when it ends. */
    void release(RequestState r, Outcome outcome) {
        open.remove(r.id());
        long end = host.ticker().nanoTime();
        long dispatched = r.dispatchNanos();
        long queue = dispatched == 0 ? end - r.arrivalNanos() : dispatched - r.arrivalNanos();
        long compute = dispatched == 0 ? 0 : end - dispatched;
        host.listener().requestEnded(name, version, outcome, Math.max(0, queue), Math.max(0, compute));
        if (state.get() == ModelState.UNLOADING && open.isEmpty()) {
            synchronized (drained) {
                drained.notifyAll();
            }
        }
    }

    /** A queued request was withdrawn by the core (cancel): tell the batcher. */
    void withdrawn(RequestState r) {
        try {
            requireNonNull(batcher, "batcher").cancelled(r);
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed on cancel of {}", name, r.describe(), t);
        }
    }

    /**
     * Checks a batch from the batcher (B1, B2, B8) and takes its requests for execution: foreign,
     * duplicate and ended requests are dropped; requests past the size limit end with an error.
     */
    List<RequestState> guard(@Nullable List<ScheduledRequest> raw, String instance) {
        if (raw == null || raw.isEmpty()) {
            return List.of();
        }
        List<RequestState> out = new ArrayList<>(raw.size());
        Set<RequestState> seen = raw.size() > 16 ? Collections.newSetFromMap(new IdentityHashMap<>()) : null;
        int total = 0;
        long now = host.ticker().nanoTime();
        for (ScheduledRequest s : raw) {
            if (!(s instanceof RequestState r) || r.model() != this) {
                log.error("the batcher of model '{}' version {} returned {}, which is not a queued request of this model; dropped", name, version, s);
                if (s instanceof RequestState foreign && foreign.tryWithdraw()) {
                    // a batcher that hands out another model's request has lost track of it: end it rather than leave its caller waiting
                    foreign.model().withdrawn(foreign);
                    foreign.terminate(BackplaneException.internal("the batcher of model '" + name + "' version " + version + " returned "
                            + foreign.describe() + " in one of its batches; it was not executed"), Outcome.OTHER, "batch-guard-foreign");
                }
                continue;
            }
            if (seen != null ? !seen.add(r) : out.contains(r)) {
                log.error("the batcher of model '{}' returned {} twice in one batch; it runs once", name, r.describe());
                continue;
            }
            if (total + r.batchSize() > maxBatch) {
                if (r.tryWithdraw()) {
                    r.terminate(BackplaneException.internal("the batcher of model '" + name + "' formed a batch over max_batch_size " + maxBatch
                            + "; " + r.describe() + " was not executed"), Outcome.OTHER, "batch-guard");
                }
                continue;
            }
            if (!r.tryDispatch(now)) {
                continue; // cancelled, timed out, or already executed
            }
            if (order != null) {
                order.reserve(r);
            }
            total += r.batchSize();
            out.add(r);
        }
        if (!out.isEmpty()) {
            host.listener().batchExecuted(name, version, out.size(), total);
        }
        return out;
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
        ModelState s = state.get();
        if (s != ModelState.READY || !state.compareAndSet(ModelState.READY, ModelState.UNLOADING)) {
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        log.info("unloading model '{}' version {} ({} open request(s))", name, version, open.size());
        BackplaneException queuedError = BackplaneException.unavailable("model '" + name + "' version " + version
                + " is unloading; the request was still queued");
        if (!drainQueued) {
            failQueued(queuedError);
        }
        awaitDrained(deadline);
        if (drainQueued) {
            failQueued(queuedError);
            awaitDrained(deadline);
        }
        if (!open.isEmpty()) {
            List<Long> pinned = open.keySet().stream().sorted().toList();
            log.warn("unload of model '{}' version {}: the deadline of {} ms passed with {} request(s) still open, pinning the version: ids {}; failing them",
                    name, version, timeout.toMillis(), pinned.size(), pinned);
            BackplaneException e = BackplaneException.unavailable("model '" + name + "' version " + version
                    + " was unloaded before the request finished (unload deadline " + timeout.toMillis() + " ms)");
            for (RequestState r : List.copyOf(open.values())) {
                r.terminate(e, Outcome.OTHER, "unload-deadline");
            }
        }
        Batcher b = batcher();
        try {
            b.close();
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to close", name, t);
        }
        for (InstanceSlot slot : instances) {
            slot.stop();
        }
        Duration grace = Duration.ofNanos(Math.max(deadline - System.nanoTime(), Duration.ofSeconds(1).toNanos()));
        for (InstanceSlot slot : instances) {
            slot.join(grace);
            slot.closeInstance(grace);
        }
        Model m = requireNonNull(model, "model");
        Bounded.run("model-close-" + name + "-v" + version, grace, m::close);
        state.set(ModelState.UNAVAILABLE);
        unavailableReason = "unloaded";
        log.info("unloaded model '{}' version {}", name, version);
    }

    private void failQueued(BackplaneException queuedError) {
        try {
            for (ScheduledRequest q : batcher().drain()) {
                if (q instanceof RequestState r && r.model() == this && r.tryWithdraw()) {
                    r.terminate(queuedError, Outcome.OTHER, "unload-queued");
                }
            }
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to drain", name, t);
        }
        for (RequestState r : open.values()) {
            if (r.phase() == RequestState.QUEUED && r.tryWithdraw()) {
                r.terminate(queuedError, Outcome.OTHER, "unload-queued");
            }
        }
    }

    private void awaitDrained(long deadline) {
        synchronized (drained) {
            long left;
            while (!open.isEmpty() && (left = deadline - System.nanoTime()) > 0) {
                try {
                    TimeUnit.NANOSECONDS.timedWait(drained, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
    }

    @Override
    public String toString() {
        return "model '" + name + "' version " + version;
    }

    private final class Context implements BatcherContext {
        @Override
        public ModelConfig config() {
            return config;
        }

        @Override
        public long version() {
            return version;
        }

        @Override
        public int instanceCount() {
            return instances.isEmpty() ? config.instanceCount() : instances.size();
        }

        @Override
        public Ticker ticker() {
            return host.ticker();
        }

        @Override
        public void reject(ScheduledRequest request, BackplaneException error) {
            if (request instanceof RequestState r && r.model() == ModelVersion.this) {
                if (r.tryWithdraw()) {
                    r.terminate(error, error.code() == ErrorCode.CANCELLED ? Outcome.CANCELED : Outcome.REJECTED, "batcher-reject");
                }
            } else {
                log.error("the batcher of model '{}' rejected {}, which is not one of its requests; ignored", name, request);
            }
        }
    }
}
