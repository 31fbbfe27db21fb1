package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.HostResponses;
import io.backplane.spi.host.RequestHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One accepted request: its scheduling state and its response sender. Owns L1, L2, L4, L5's
 * "only the still-open requests" and B1's dispatch-at-most-once; what the request holds on its
 * model version it gives back through one call of {@link Hold#release}.
 *
 * <p>Two independent compare-and-set words make the lifecycle guarantees:
 * <ul>
 *   <li>{@code open} (OPEN → CLOSED) is the one idempotent release (L1, L4): whoever wins it —
 *       a FINAL send, an error path, cancellation, a timeout, unload — delivers the terminal
 *       outcome and releases the model-version hold; every loser is a no-op, counted.</li>
 *   <li>{@code phase} (QUEUED → DISPATCHED, or QUEUED → WITHDRAWN) makes a request execute at
 *       most once (B1) and lets a queued request be cancelled or timed out without racing the
 *       worker that takes it.</li>
 * </ul>
 * Sends of decoupled models are serialized on this object so that a streaming observer never
 * sees two calls at once; a plain model's single FINAL needs only the CAS.
 *
 * <p>Flow control ({@link #ready()}): a waiter is registered before {@code open} is re-read, and
 * whoever closes the request sets {@code open} before it completes the registered waiters, so a
 * close racing a {@code ready()} call never leaves a waiter behind.
 */
final class RequestState implements ScheduledRequest, ResponseSender {
    private static final Logger log = LoggerFactory.getLogger(RequestState.class);

    private static final CompletionStage<Void> READY = CompletableFuture.completedStage(null);
    private static final int OPEN = 0;
    private static final int CLOSED = 1;
    static final int QUEUED = 0;
    static final int DISPATCHED = 1;
    static final int WITHDRAWN = 2;

    /**
     * What a request holds on the model version that admitted it. {@link #release} is called
     * exactly once per request, by the winner of its {@code open} CAS, before the terminal
     * response is delivered (L3).
     */
    interface Hold {
        /** The request ended with {@code outcome}: drop its hold. */
        void release(RequestState r, Outcome outcome);

        /** The request was taken out of the queue before it was dispatched (cancel): forget it. */
        void withdrawn(RequestState r);

        /** A request of this version started a child request (BLS). */
        default void childStarted() {
        }
    }

    /**
     * The version a request belongs to, as the request sees it: fixed facts, its hold, and the
     * reorder stage (null unless the model preserves ordering). One per model version.
     */
    record Origin(String model, long version, ModelConfig config, Hold hold, @Nullable ResponseOrder order, HostContext host,
            Classification classes) {
        Origin {
            requireNonNull(classes, "classes is null");
            requireNonNull(model, "model is null");
            requireNonNull(config, "config is null");
            requireNonNull(hold, "hold is null");
            requireNonNull(host, "host is null");
        }
    }

    private final long id;
    /** Replaced only by {@link #addInputs} while the request is queued, by the batcher that holds it. */
    private volatile InferenceRequest request;
    private volatile @Nullable UnaryOperator<InferenceResponse> responseHook;
    private volatile boolean rescheduleAsked;
    private final Origin origin;
    private final ResponseSink sink;
    private final ResponseOrder.@Nullable Ticket ticket;
    private final int batchSize;
    private final int priorityLevel;
    private final long arrivalNanos;
    private final AtomicInteger open = new AtomicInteger(OPEN);
    private final AtomicInteger phase = new AtomicInteger(QUEUED);
    /** Whether {@code requestLeftQueue} was reported: once, though a rescheduled request is dispatched again. */
    private volatile boolean leftQueue; // set through LEFT_QUEUE
    private static final java.lang.invoke.VarHandle LEFT_QUEUE;

    static {
        try {
            LEFT_QUEUE = java.lang.invoke.MethodHandles.lookup().findVarHandle(RequestState.class, "leftQueue", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private volatile boolean cancelled;
    private volatile long dispatchNanos;
    /**
     * Generation figures ({@link #reportOutput}): whether a response with output was reported, and
     * when the last one was. Confined like the sends: under this object's lock for a decoupled
     * model, the one FINAL's winner for a plain one.
     */
    private boolean outputSent;
    private long lastOutputNanos;
    /** The request whose execution started this one (a BLS call), or null. */
    private final @Nullable RequestState parent;
    /** A warm-up request ({@link Warmup}), or a child of one: kept out of statistics, metrics and the response cache. */
    private final boolean warmUp;
    private volatile @Nullable ChildRequests children;
    /** Set on a response-cache miss: where the successful response is stored. */
    private volatile @Nullable ResponseCache cache;
    private volatile ResponseCache.@Nullable Key cacheKey;
    private volatile long cacheLoad;
    /**
     * Stages handed out by {@link #ready()} that wait for the sink; all completed when the request
     * closes. Created by the first such wait (most requests never wait: no allocation for them).
     */
    private volatile @Nullable Set<CompletableFuture<Void>> readyWaiters;
    /** {@link #whenClosed} hooks not yet run; {@link #HOOKS_RUN} once they ran. */
    private final AtomicReference<@Nullable Runnable> closeHooks = new AtomicReference<>();
    private static final Runnable HOOKS_RUN = () -> { };

    RequestState(long id, InferenceRequest request, Origin origin, ResponseSink sink, int batchSize, int priorityLevel, long arrivalNanos) {
        this.id = id;
        this.request = requireNonNull(request, "request is null");
        this.origin = requireNonNull(origin, "origin is null");
        this.sink = requireNonNull(sink, "sink is null");
        ResponseOrder order = origin.order();
        this.ticket = order == null ? null : order.ticket();
        this.batchSize = batchSize;
        this.priorityLevel = priorityLevel;
        this.arrivalNanos = arrivalNanos;
        this.parent = sink instanceof ChildRequests.Link link ? link.parent() : null;
        this.warmUp = sink instanceof Warmup.Sink || parent != null && parent.warmUp;
    }

    /** Whether this is a warm-up request or a child of one: the host's listeners (statistics, metrics) and the response cache never see it. */
    boolean warmUp() {
        return warmUp;
    }

    @Override
    public long id() {
        return id;
    }

    @Override
    public InferenceRequest request() {
        return request;
    }

    @Override
    public ResponseSender sender() {
        return this;
    }

    @Override
    public void addInputs(List<Tensor> inputs) {
        if (phase.get() != QUEUED) {
            throw new IllegalStateException("inputs can be added to " + describe() + " only while it is queued");
        }
        InferenceRequest.Builder b = request.toBuilder().clearInputs();
        for (Tensor t : request.inputs()) {
            if (inputs.stream().noneMatch(n -> n.name().equals(t.name()))) {
                b.input(t);
            }
        }
        request = b.inputs(inputs).build();
    }

    @Override
    public void reschedule() {
        if (!origin.config().decoupled()) {
            throw new IllegalStateException(describe() + " belongs to a model that is not decoupled; only decoupled models reschedule requests");
        }
        if (phase.get() != DISPATCHED) {
            throw new IllegalStateException(describe() + " is not executing; only an executing request can be rescheduled");
        }
        rescheduleAsked = true;
    }

    /** Takes the reschedule wish once (the worker, after execute returned); true when the open request goes back to its queue. */
    boolean takeReschedule() {
        if (!rescheduleAsked) {
            return false;
        }
        rescheduleAsked = false;
        return !isClosed() && phase.compareAndSet(DISPATCHED, QUEUED);
    }

    @Override
    public void onResponse(UnaryOperator<InferenceResponse> hook) {
        if (responseHook != null) {
            throw new IllegalStateException(describe() + " already has a response hook");
        }
        responseHook = requireNonNull(hook, "hook is null");
    }

    /** The response as the client gets it: through the batcher's hook, if any (a hook that throws costs a log line). */
    private InferenceResponse hooked(InferenceResponse r) {
        UnaryOperator<InferenceResponse> h = responseHook;
        if (h == null || r.error() != null) {
            return r;
        }
        try {
            return requireNonNull(h.apply(r), "the response hook returned null");
        } catch (Throwable t) {
            log.warn("the response hook of {} failed; the response goes out unchanged", describe(), t);
            return r;
        }
    }

    @Override
    public boolean isCancelled() {
        return cancelled;
    }

    @Override
    public boolean isClosed() {
        return open.get() == CLOSED;
    }

    @Override
    public int batchSize() {
        return batchSize;
    }

    @Override
    public int priorityLevel() {
        return priorityLevel;
    }

    @Override
    public long arrivalNanos() {
        return arrivalNanos;
    }

    Origin origin() {
        return origin;
    }

    @Nullable RequestState parent() {
        return parent;
    }

    @Override
    public io.backplane.spi.host.RequestHandle startChild(InferenceRequest child, io.backplane.spi.host.ResponseObserver observer) {
        ChildRequests c = children;
        if (c == null) {
            synchronized (open) {
                c = children;
                if (c == null) {
                    c = new ChildRequests(this);
                    children = c;
                }
            }
        }
        origin.hold().childStarted();
        return c.start(child, observer, origin.host());
    }

    /** The request ended: its open children are cancelled (C1). */
    void endChildren() {
        ChildRequests c = children;
        if (c != null) {
            c.parentEnded();
        }
    }

    /** Whether this request was admitted by {@code o}'s version (the batch guard drops foreign ones). */
    boolean belongsTo(Origin o) {
        return origin == o;
    }

    /** The place of this request in its model's response order; null unless the model preserves ordering. */
    ResponseOrder.@Nullable Ticket ticket() {
        return ticket;
    }

    /** The handle a client holds: it can cancel the request and see that it ended, nothing more. */
    RequestHandle handle() {
        return new Handle(this);
    }

    /** Runs this request on the caller blocking on it, when an instance is idle ({@link Joinable}); null: never. */
    private volatile java.util.function.@Nullable Predicate<RequestState> helper;

    /** Lets the caller that blocks on this queued request run it through {@code h} (its version's instances). */
    void helper(java.util.function.Predicate<RequestState> h, java.util.function.Consumer<RequestState> giveToWorker) {
        handOver = giveToWorker;
        helper = h;
    }

    /** Wakes a worker for this request when its caller will not run it ({@link Joinable#handOver}). */
    private volatile java.util.function.@Nullable Consumer<RequestState> handOver;

    /** Whether the caller blocking on this request may run it ({@link Joinable#callerHelps}). */
    boolean hasHelper() {
        return helper != null;
    }

    private boolean help() {
        var h = helper;
        return h != null && !isClosed() && h.test(this);
    }

    private void handOver() {
        var h = handOver;
        if (h != null && !isClosed()) {
            h.accept(this);
        }
    }

    private record Handle(RequestState r) implements RequestHandle, Joinable {
        @Override
        public boolean help() {
            return r.help();
        }

        @Override
        public void handOver() {
            r.handOver();
        }

        @Override
        public long id() {
            return r.id;
        }

        @Override
        public boolean cancel() {
            return r.cancel();
        }

        @Override
        public boolean isDone() {
            return r.isClosed();
        }
    }

    // ---- the backend's side: ResponseSender ----

    @Override
    public void send(@Nullable InferenceResponse response, int flags) {
        if ((flags & ~FINAL) != 0) {
            throw new IllegalArgumentException("unknown response flags " + flags + " for " + describe() + ": use 0 or ResponseSender.FINAL");
        }
        boolean fin = flags == FINAL;
        if (!origin.config().decoupled()) {
            if (!fin) {
                throw new IllegalStateException(describe() + " belongs to a model that is not decoupled: send its single response with FINAL");
            }
            if (response == null) {
                throw new IllegalStateException(describe() + " belongs to a model that is not decoupled: a FINAL must carry the response");
            }
            if (!open.compareAndSet(OPEN, CLOSED)) {
                throw closedError();
            }
            finish(response);
            releaseWaiters();
            return;
        }
        if (response == null && !fin) {
            throw new IllegalArgumentException("a null response is allowed only with FINAL (" + describe() + ")");
        }
        synchronized (this) {
            if (open.get() == CLOSED) {
                throw closedError();
            }
            if (!fin) {
                reportOutput(response);
                deliver(() -> sink.partial(stamp(response)));
                return;
            }
            open.set(CLOSED);
        }
        // Past the monitor: every partial delivered before it, none can follow (CLOSED). Ending the
        // request cancels its open children, whose links hold their own monitors while they send to
        // this request: under this monitor that order would deadlock (C1 against a step's response).
        finish(response);
        releaseWaiters();
    }

    @Override
    public CompletionStage<Void> ready() {
        if (isClosed()) {
            return READY;
        }
        CompletionStage<Void> consumer;
        try {
            consumer = requireNonNull(sink.ready(), "ready() returned null");
        } catch (RuntimeException e) {
            log.warn("the receiver of {} failed to say whether it is ready; taken as ready", describe(), e);
            return READY;
        }
        if (isDone(consumer)) {
            return READY;
        }
        Set<CompletableFuture<Void>> waiters = readyWaiters;
        if (waiters == null) {
            synchronized (this) {
                waiters = readyWaiters;
                if (waiters == null) {
                    waiters = ConcurrentHashMap.newKeySet();
                    readyWaiters = waiters;
                }
            }
        }
        CompletableFuture<Void> waiter = new CompletableFuture<>();
        waiters.add(waiter);
        Set<CompletableFuture<Void>> registered = waiters;
        consumer.whenComplete((v, t) -> {
            registered.remove(waiter);
            waiter.complete(null);
        });
        if (isClosed()) { // closed while registering: its releaseWaiters may have missed this one
            waiters.remove(waiter);
            waiter.complete(null);
        }
        return waiter;
    }

    /** Whether {@code stage} has completed, where it can tell without a callback (a minimal stage cannot). */
    private static boolean isDone(CompletionStage<Void> stage) {
        try {
            return stage.toCompletableFuture().isDone();
        } catch (UnsupportedOperationException e) {
            return false;
        }
    }

    /**
     * Runs {@code hook} once when this request closes, or at once when it has closed (any thread;
     * the core's bookkeeping, e.g. the instance a decoupled request streams from). Hooks added
     * before the close run in the order added, on the thread that closes it.
     */
    void whenClosed(Runnable hook) {
        requireNonNull(hook, "hook is null");
        Runnable prev;
        do {
            prev = closeHooks.get();
            if (prev == HOOKS_RUN) {
                hook.run();
                return;
            }
        } while (!closeHooks.compareAndSet(prev, prev == null ? hook : chain(prev, hook)));
        if (isClosed()) {
            runCloseHooks(); // closed while it was added: the close may have run the hooks before it
        }
    }

    private static Runnable chain(Runnable first, Runnable then) {
        return () -> {
            first.run();
            then.run();
        };
    }

    private void runCloseHooks() {
        Runnable h = closeHooks.getAndSet(HOOKS_RUN);
        if (h != null && h != HOOKS_RUN) {
            h.run();
        }
    }

    /** The request closed: whatever waits for its consumer goes on (nothing waits forever on a closed sender). */
    private void releaseWaiters() {
        runCloseHooks();
        Set<CompletableFuture<Void>> waiters = readyWaiters;
        if (waiters == null) {
            return;
        }
        for (CompletableFuture<Void> w : waiters) {
            waiters.remove(w);
            w.complete(null);
        }
    }

    /** Releases the hold first (L3: a client that saw the FINAL finds the version free), then delivers. */
    private void finish(@Nullable InferenceResponse response) {
        InferenceResponse last = null;
        BackplaneException e = response == null ? null : response.error();
        if (e == null && response != null) {
            store(response);
            try {
                last = stamp(response);
            } catch (BackplaneException bad) {
                e = bad;
            } catch (RuntimeException bad) {
                e = new BackplaneException(ErrorCode.INTERNAL, describe() + ": its response cannot be delivered: " + bad, bad);
            }
        }
        if (e != null) {
            BackplaneException error = e;
            origin.hold().release(this, error.code() == ErrorCode.CANCELLED ? Outcome.CANCELED : Outcome.BACKEND);
            deliverFinal(() -> sink.failed(error));
        } else {
            if (response != null) {
                reportOutput(response);
            }
            origin.hold().release(this, Outcome.SUCCESS);
            InferenceResponse delivered = last;
            deliverFinal(() -> sink.last(delivered));
        }
    }

    /**
     * Reports a response that carries output to the listeners ({@code HostListener.responseSent}):
     * the first with the time since acceptance, later ones with the time since the previous one.
     * Callers hold the send confinement ({@link #outputSent}); runs before the response is
     * delivered and before the request's end is reported.
     */
    private void reportOutput(InferenceResponse response) {
        if (warmUp || response.error() != null || response.outputs().isEmpty()) {
            return;
        }
        long tokens = OutputTokens.of(response);
        if (tokens == 0) {
            return;
        }
        long now = origin.host().ticker().nanoTime();
        boolean first = !outputSent;
        long since = first ? arrivalNanos : lastOutputNanos;
        outputSent = true;
        lastOutputNanos = now;
        origin.host().listener().responseSent(origin.model(), origin.version(), first, Math.max(0, now - since), tokens);
    }

    /** Marks this request to have its successful response stored in {@code c} under {@code key}. */
    void storeOnSuccess(ResponseCache c, ResponseCache.Key key, long load) {
        cacheKey = key;
        cacheLoad = load;
        cache = c;
    }

    private void store(InferenceResponse response) {
        ResponseCache c = cache;
        ResponseCache.Key key = cacheKey;
        if (c == null || key == null) {
            return;
        }
        long start = origin.host().ticker().nanoTime();
        try {
            if (c.insert(key, cacheLoad, response)) {
                origin.host().listener().cacheInserted(origin.model(), origin.version(), origin.host().ticker().nanoTime() - start);
            }
        } catch (RuntimeException e) {
            log.warn("{}: its response could not be stored in the response cache; the request is unaffected", describe(), e);
        }
    }

    private IllegalStateException closedError() {
        return new IllegalStateException("response sender of " + describe()
                + " is closed: a FINAL was already sent or the host ended the request; nothing was sent");
    }

    // ---- the core's side ----

    /**
     * Ends the request with {@code error} unless it already ended (L4: one idempotent release).
     *
     * @return whether this call ended it
     */
    boolean terminate(BackplaneException error, Outcome outcome, String path) {
        if (origin.config().decoupled()) {
            synchronized (this) { // waits for a partial being delivered; none follows once CLOSED
                if (!open.compareAndSet(OPEN, CLOSED)) {
                    origin.host().duplicateRelease(origin.model(), origin.version(), id, path);
                    return false;
                }
            }
            // outside the monitor, as in send: the release cancels open children, whose links may be sending to this request
            origin.hold().release(this, outcome);
            deliver(() -> sink.failed(error));
            releaseWaiters();
            return true;
        }
        if (!open.compareAndSet(OPEN, CLOSED)) {
            origin.host().duplicateRelease(origin.model(), origin.version(), id, path);
            return false;
        }
        origin.hold().release(this, outcome);
        deliverFinal(() -> sink.failed(error));
        releaseWaiters();
        return true;
    }

    /**
     * Admission's refusal of a request it registered but does not accept (the version stopped
     * serving, or its queue is full, between the registration and the check): true when this call
     * closed it, so nothing was or will be delivered to its sink and the refusal may be thrown;
     * false when an unload's drain took it first, which ends it through its sink (L1: then the
     * admission must not throw, or the caller would end it a second time).
     */
    boolean refuse() {
        return phase.compareAndSet(QUEUED, WITHDRAWN) && open.compareAndSet(OPEN, CLOSED);
    }

    /** Takes the request out of the queue for execution; false if it was cancelled, timed out or already taken (B1). */
    boolean tryDispatch(long now) {
        if (phase.compareAndSet(QUEUED, DISPATCHED)) {
            dispatchNanos = now;
            reportLeftQueue();
            return true;
        }
        return false;
    }

    /**
     * Reports {@code HostListener.requestLeftQueue} for this request unless it was reported already:
     * at its first dispatch, or at its end when it never ran. A rescheduled request (decoupled
     * RESCHEDULE, an iterative sequence) waits again without counting as pending again.
     */
    void reportLeftQueue() {
        if (!warmUp() && LEFT_QUEUE.compareAndSet(this, false, true)) {
            origin.host().listener().requestLeftQueue(origin.model(), origin.version());
        }
    }

    /** Takes a queued request out for good (cancel, timeout, unload); false if a worker already took it. */
    boolean tryWithdraw() {
        return phase.compareAndSet(QUEUED, WITHDRAWN);
    }

    /** Takes a queued request out for good and tells its batcher (cancel); false if a worker already took it. */
    boolean withdraw() {
        if (!tryWithdraw()) {
            return false;
        }
        origin.hold().withdrawn(this);
        return true;
    }

    int phase() {
        return phase.get();
    }

    long dispatchNanos() {
        return dispatchNanos;
    }

    /**
     * Cancels (B6): a queued request ends at once with CANCELLED; an executing one is flagged for
     * its backend, which still ends it.
     *
     * @return whether the request was still open
     */
    boolean cancel() {
        cancelled = true;
        ChildRequests c = children;
        if (c != null) {
            c.cancelOpen();
        }
        if (withdraw()) {
            terminate(new BackplaneException(ErrorCode.CANCELLED, describe() + " was cancelled while queued"), Outcome.CANCELED, "cancel");
            return true;
        }
        return !isClosed();
    }

    private InferenceResponse stamp(InferenceResponse given) {
        InferenceResponse r = hooked(given);
        List<String> wanted = request.requestedOutputs();
        InferenceResponse out = r;
        if (!wanted.isEmpty() && r.error() == null) {
            List<Tensor> kept = new ArrayList<>(wanted.size());
            for (Tensor t : r.outputs()) {
                if (wanted.contains(t.name())) {
                    kept.add(t);
                }
            }
            if (kept.size() != r.outputs().size()) {
                out = InferenceResponse.of(kept, r.parameters());
            }
        }
        InferenceResponse client = origin.classes().apply(request, Reshape.toClient(origin.config(), out), origin.config().batches());
        return HostResponses.stamp(client, origin.model(), origin.version(), request.id());
    }

    /** Delivers the terminal outcome: at once, or through the model's reorder stage (preserve_ordering). */
    private void deliverFinal(Runnable call) {
        ResponseOrder order = origin.order();
        ResponseOrder.Ticket t = ticket;
        if (order == null || t == null) {
            deliver(call);
        } else {
            order.deliver(t, () -> deliver(call));
        }
    }

    private void deliver(Runnable call) {
        try {
            call.run();
        } catch (RuntimeException | Error e) {
            log.warn("the receiver of {} threw while taking a response; the request is unaffected", describe(), e);
        }
    }

    /** "request #12 (model 'm' version 1)". */
    String describe() {
        return "request #" + id + (request.id().isEmpty() ? "" : " (id '" + request.id() + "')") + " to model '" + origin.model()
                + "' version " + origin.version();
    }

    @Override
    public String toString() {
        return describe();
    }
}
