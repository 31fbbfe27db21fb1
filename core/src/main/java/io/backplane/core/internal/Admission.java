package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.host.ModelState;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * Admission to one model version, and the holds of its open requests.
 *
 * <p>Owns:
 * <ul>
 *   <li><b>L7, no request slips past an unload.</b> {@link #admit} registers the hold first and
 *       then reads the state; {@link #beginUnload} writes the state first, and the unload then
 *       reads the holds. This Dekker-style handshake means either the request sees UNLOADING and
 *       withdraws, or the unload sees its hold and ends it.</li>
 *   <li><b>L3, a hold ends with its request.</b> {@link #release} is the request's
 *       {@link RequestState.Hold}: it drops the hold at once and wakes an unload waiting for the
 *       last one.</li>
 *   <li><b>Refusal is not acceptance.</b> A request that fails validation, asks a decoupled model
 *       for a single response, names a priority the model lacks, or arrives while the version is
 *       not READY gets an exception from {@link #admit}: it never held the version, and its sink
 *       is never called.</li>
 *   <li><b>B7.</b> Every accepted request takes its id from the host's counter.</li>
 * </ul>
 * The version's lifecycle state lives here, because admission and unload must write and read it in
 * this order; {@link ModelVersion} moves it.
 */
final class Admission implements RequestState.Hold {
    private static final Logger log = LoggerFactory.getLogger(Admission.class);
    private final String name;
    private final long version;
    private final ModelConfig config;
    private final HostContext host;
    private final RequestState.Origin origin;
    private final AtomicReference<ModelState> state = new AtomicReference<>(ModelState.LOADING);
    private final Map<Long, RequestState> open = new ConcurrentHashMap<>();
    private final Object drained = new Object();
    // set once by open(), before the state becomes READY; read only after admit saw READY
    private @Nullable BatchGuard queue;
    private volatile List<InstanceSlot> inline = List.of();
    /** The host's default queue bound, when the config sets no max_queue_size of its own (0: none). */
    private final int defaultQueueBound;
    /** The instances an ensemble step may run on without a hand-off (a model without a batcher), see {@link StepTrampoline}. */
    private volatile List<InstanceSlot> stepSlots = List.of();
    /**
     * Whether a request of this version ever started a child request, or its backend may start them
     * ({@code BackendCapabilities.childRequests()}): its steps then never borrow another model's worker.
     */
    private volatile boolean startsChildren = true;
    private @Nullable EnsembleScheduler ensemble;
    /** The host's response cache when this model uses it, else null. */
    private final @Nullable ResponseCache cache;
    /** This load's number in the response cache (its keys and entries); 0 without a cache. */
    private final long cacheLoad;

    Admission(String name, long version, ModelConfig config, HostContext host, @Nullable ResponseOrder order, Classification classes) {
        this.name = requireNonNull(name, "name is null");
        this.version = version;
        this.config = requireNonNull(config, "config is null");
        this.host = requireNonNull(host, "host is null");
        this.origin = new RequestState.Origin(name, version, config, this, order, host, classes);
        this.cache = ResponseCache.enabledFor(config) ? host.responseCache() : null;
        this.cacheLoad = cache == null ? 0 : cache.newLoad();
        this.defaultQueueBound = setsQueueSize(config) ? 0 : host.limits().defaultMaxQueueSize();
    }

    private static boolean setsQueueSize(ModelConfig config) {
        var db = config.dynamicBatching();
        if (db == null) {
            return false;
        }
        if (db.defaultQueuePolicy().maxQueueSize() > 0) {
            return true;
        }
        for (var p : db.priorityQueuePolicy().values()) {
            if (p.maxQueueSize() > 0) {
                return true;
            }
        }
        return false;
    }

    /** What every request of this version carries: the version's facts and this hold. */
    RequestState.Origin origin() {
        return origin;
    }

    ModelState state() {
        return state.get();
    }

    /** Runs a queued request on the caller that blocks on it, on the first idle instance ({@link Joinable}). */
    private java.util.function.Predicate<RequestState> helpOnIdle = r -> false;

    /**
     * Starts admitting: requests queue through {@code queue}; with caller-runs, they may first try
     * the idle instances in {@code callerRuns} on the calling thread; ensemble steps may run on
     * {@code steps} from a thread with a {@link StepTrampoline}. LOADING → READY.
     */
    void open(BatchGuard queue, List<InstanceSlot> callerRuns, List<InstanceSlot> steps, boolean noChildRequests, long loadNanos) {
        this.queue = requireNonNull(queue, "queue is null");
        this.startsChildren = !noChildRequests;
        this.inline = List.copyOf(callerRuns);
        this.stepSlots = List.copyOf(steps);
        this.helpOnIdle = r -> {
            for (InstanceSlot slot : stepSlots) { // read each time: the instances may change while it serves
                if (slot.tryHelp(r)) {
                    return true;
                }
            }
            queue.handOver(r); // no instance idle: a worker runs it, woken now if it was queued quietly
            return false;
        };
        state.set(ModelState.READY);
        host.listener().versionLoaded(name, version, loadNanos);
    }

    /**
     * The instances changed while the version serves ({@link ModelVersion#resize}): callers and
     * ensemble steps run inline on these from now on. Only for a version that passed them to
     * {@link #open} (a model without a batcher); a retired slot still listed elsewhere refuses.
     */
    void slotsChanged(List<InstanceSlot> callerRuns, List<InstanceSlot> steps) {
        this.inline = List.copyOf(callerRuns);
        this.stepSlots = List.copyOf(steps);
    }

    /** Starts admitting to an ensemble: requests start at once in {@code scheduler}. LOADING → READY. */
    void openEnsemble(EnsembleScheduler scheduler, long loadNanos) {
        this.ensemble = requireNonNull(scheduler, "scheduler is null");
        state.set(ModelState.READY);
        host.listener().versionLoaded(name, version, loadNanos);
    }

    /** READY → UNLOADING: from now on new requests are refused. False when the version was not READY. */
    boolean beginUnload() {
        return state.compareAndSet(ModelState.READY, ModelState.UNLOADING);
    }

    /** The version serves no more (unloaded, or its load failed). */
    void closed() {
        state.set(ModelState.UNAVAILABLE);
        if (cache != null) {
            cache.drop(cacheLoad);
        }
    }

    /**
     * Accepts a request: validates it, registers its hold, queues it (or runs it on this thread,
     * with caller-runs).
     *
     * @throws BackplaneException INVALID_ARGUMENT for a bad request, UNAVAILABLE when the version
     *     is not serving; the request was not accepted and the sink was not called
     */
    RequestState admit(InferenceRequest request, ResponseSink sink) {
        if (config.decoupled() && !sink.streams()) {
            throw BackplaneException.invalid("model '" + name + "' is decoupled (it may send any number of responses): call it through a stream "
                    + "(REST: POST /v2/models/" + name + "/generate_stream; gRPC: ModelStreamInfer; Java: InferenceService.stream)");
        }
        int batchSize = RequestValidator.validate(config, request);
        Classification.validate(config, request);
        request = Reshape.toBackend(config, request);
        int level = priorityLevel(request);
        RequestState r = new RequestState(host.nextRequestId(), request, origin, sink, batchSize, level, host.ticker().nanoTime());
        open.put(r.id(), r);
        ModelState s = state.get();
        if (s != ModelState.READY) {
            if (!r.refuse()) {
                return acceptedThenEnded(r);
            }
            open.remove(r.id());
            throw new BackplaneException(ErrorCode.UNAVAILABLE, "model '" + name + "' version " + version + " is "
                    + (s == ModelState.UNLOADING ? "unloading" : "not available") + "; retry once it is loaded");
        }
        BatchGuard queued = queue; // null for an ensemble, whose requests never queue here
        int bound = defaultQueueBound;
        if (queued != null && bound > 0 && queued.queued() >= bound) {
            if (!r.refuse()) {
                return acceptedThenEnded(r);
            }
            open.remove(r.id());
            throw new BackplaneException(ErrorCode.RESOURCE_EXHAUSTED, "the queue of model '" + name + "' is full (" + bound
                    + " requests wait: the host's default queue bound, as its config sets no max_queue_size); retry later, or set "
                    + "dynamic_batching { default_queue_policy { max_queue_size: N } } in its config or the host's default "
                    + "(embedded builder defaultMaxQueueSize, backplane serve --default-max-queue-size; 0: unbounded)");
        }
        boolean warmUp = r.warmUp();
        if (!warmUp) {
            host.listener().requestAccepted(name, version);
        }
        if (cache != null && !warmUp && answeredFromCache(cache, r)) {
            return r;
        }
        EnsembleScheduler e = ensemble;
        if (e != null) {
            r.tryDispatch(host.ticker().nanoTime()); // nothing queues: the request runs from now on
            if (host.callerRuns() && !(sink instanceof ChildRequests.Link)) {
                StepTrampoline.run(null, () -> e.start(r)); // caller-runs: this caller runs the steps whose instances are idle
            } else {
                e.start(r);
            }
            return r;
        }
        BatchGuard q = requireNonNull(queue, "queue");
        if (sink instanceof ChildRequests.Link l) {
            // A child (BLS) never runs on its caller's thread: that is often a backend's I/O thread. An ensemble
            // step may, on a thread with a step trampoline (a worker, or a caller with caller-runs), outside any execute.
            if (l.ensembleStep() && !stepSlots.isEmpty() && q.isIdle()) {
                for (InstanceSlot slot : stepSlots) {
                    // a worker lends itself only to a quick step that never waits for child requests: such a wait could
                    // need the very worker it borrowed
                    if (StepTrampoline.mayRunStepInline(!startsChildren && slot.isQuick()) && slot.tryRunInline(r)) {
                        return r;
                    }
                }
            }
        } else if (!inline.isEmpty() && q.isIdle()) {
            for (InstanceSlot slot : inline) {
                if (slot.tryRunInline(r)) {
                    return r;
                }
            }
        } else if (sink.joins() && !stepSlots.isEmpty()) {
            r.helper(helpOnIdle, q::handOver); // its caller blocks on it and may run it while it still waits here
        }
        q.enqueue(r);
        return r;
    }

    /**
     * A request an unload's drain found in {@link #open} before this admission could refuse it: that
     * path ends it through its sink (and reports its end), so it counts as accepted, never thrown.
     */
    private RequestState acceptedThenEnded(RequestState r) {
        if (!r.warmUp()) {
            host.listener().requestAccepted(name, version);
        }
        return r;
    }

    /** Looks {@code r} up in the response cache: a hit ends it at once; a miss marks it to be stored when it succeeds. */
    private boolean answeredFromCache(ResponseCache c, RequestState r) {
        ResponseCache.Key key = ResponseCache.key(name, version, cacheLoad, r.request());
        if (key == null) {
            return false;
        }
        long start = host.ticker().nanoTime();
        InferenceResponse hit = c.lookup(key);
        long now = host.ticker().nanoTime();
        host.listener().cacheLookup(name, version, hit != null, now - start);
        if (hit == null) {
            r.storeOnSuccess(c, key, cacheLoad);
            return false;
        }
        if (r.tryDispatch(now)) {
            r.send(hit, io.backplane.spi.ResponseSender.FINAL);
        }
        return true;
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

    @Override
    public void release(RequestState r, Outcome outcome) {
        open.remove(r.id());
        r.endChildren();
        long end = host.ticker().nanoTime();
        long dispatched = r.dispatchNanos();
        long queued = dispatched == 0 ? end - r.arrivalNanos() : dispatched - r.arrivalNanos();
        long compute = dispatched == 0 ? 0 : end - dispatched;
        r.reportLeftQueue(); // when it ended while it waited (reported once: a dispatch reported it already)
        if (!r.warmUp()) {
            host.listener().requestEnded(name, version, outcome, Math.max(0, queued), Math.max(0, compute));
        }
        try {
            r.request().trace().timings(name, version, Math.max(0, queued), Math.max(0, compute), outcome == Outcome.SUCCESS);
        } catch (RuntimeException e) {
            log.warn("the request trace of model '{}' failed", name, e);
        }
        if (state.get() == ModelState.UNLOADING && open.isEmpty()) {
            synchronized (drained) {
                drained.notifyAll();
            }
        }
    }

    @Override
    public void childStarted() {
        if (!startsChildren) {
            startsChildren = true;
        }
    }

    @Override
    public void withdrawn(RequestState r) {
        BatchGuard q = queue;
        if (q != null) {
            q.cancelled(r);
        }
    }

    /** Ids of the open requests: the holds on this version. */
    Set<Long> openIds() {
        return Set.copyOf(open.keySet());
    }

    /** The open requests now (a snapshot). */
    List<RequestState> openRequests() {
        return List.copyOf(open.values());
    }

    boolean isDrained() {
        return open.isEmpty();
    }

    /** Waits, while unloading, until no hold is left or the deadline ({@link System#nanoTime}) passes. */
    void awaitDrained(long deadline) {
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
}
