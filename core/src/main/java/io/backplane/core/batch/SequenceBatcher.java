package io.backplane.core.batch;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.Ticker;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.SequenceBatching.Control;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * Triton's sequence batcher for one model version: requests carry a correlation id; the requests
 * of one sequence run in arrival order on one <em>slot</em>, which belongs to one instance.
 *
 * <p><b>Slots.</b> {@code direct}: each instance has {@code max(1, max_batch_size)} slots, and a
 * slot is one batch index: a batch holds at most one request per slot, ordered by slot index.
 * {@code oldest}: each instance has {@code max_candidate_sequences} slots (default
 * {@code max(1, max_batch_size)}), and a batch takes the oldest head request of its sequences, up
 * to the largest preferred batch size (or the caller's maximum). A sequence that finds no free
 * slot waits in the backlog, in arrival order, and takes the first slot that frees.
 *
 * <p><b>Order.</b> A sequence is bound to one instance, whose worker alone takes its requests,
 * one per batch; an instance executes one batch at a time, so a sequence's requests execute in
 * arrival order and a request's response (and its implicit state) is sent before the next one is
 * taken (DESIGN C4).
 *
 * <p><b>Release</b> (C4: exactly once, never a silent reset). A slot is released when the
 * request with the end flag is taken, when the sequence stays idle past
 * {@code max_sequence_idle_microseconds} (checked by every worker and by {@link #enqueue}, on the
 * host's {@link Ticker}), when its instance fails ({@link #instanceFailed}: its queued requests
 * fail at once) and when the batcher is drained (unload). The id of a sequence released by idle
 * time or failure is remembered (bounded), and its next request without the start flag fails
 * naming the id and why; an id never seen fails as unknown.
 *
 * <p>One lock guards all state; a wait for a batch's delay or a sequence's idle expiry is at most
 * {@link #MAX_WAIT_NANOS} (an injected clock that jumps is seen soon); with nothing queued and
 * no sequence that can expire, a worker waits for work or its own timeout (not every 5 ms).
 * Rejections go through {@link BatcherContext#reject} outside the lock.
 */
final class SequenceBatcher implements Batcher {
    static final long MAX_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
    /** How many released ids are remembered for their error message. */
    private static final int REMEMBERED = 10_000;

    private record Key(boolean number, String id) {
        @Override
        public String toString() {
            return number ? id : "\"" + id + "\"";
        }
    }

    private static final class Sequence {
        final Key key;
        final ArrayDeque<ScheduledRequest> queue = new ArrayDeque<>();
        int instance = -1;
        int slot = -1;
        long lastActivity;
        /** Iterative sequences: the request the instance executes now (it may come back rescheduled). */
        @Nullable ScheduledRequest inFlight;
        final Map<String, Tensor> state = new ConcurrentHashMap<>();

        Sequence(Key key) {
            this.key = key;
        }
    }

    private final BatcherContext context;
    private final Ticker ticker;
    private final String model;
    private final SequenceBatching config;
    private final boolean oldest;
    private final boolean iterative;
    private final boolean batching;
    private final long idleNanos;
    private final long delayNanos;
    private final int cap;
    private final Sequence[][] slots;
    private final Map<String, Tensor> initialState = new HashMap<>();
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition work = lock.newCondition();
    private final Map<Key, Sequence> active = new HashMap<>();
    private final LinkedHashMap<Key, Sequence> backlog = new LinkedHashMap<>();
    /** Waits of workers on {@code work}, for tests (guarded by the lock). */
    private long waits;
    private final LinkedHashMap<Key, String> released = new LinkedHashMap<>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Key, String> eldest) {
            return size() > REMEMBERED;
        }
    };
    private int queuedRequests;
    private int inUse;
    private boolean closed;

    SequenceBatcher(BatcherContext context, SequenceBatching config) {
        this.context = requireNonNull(context, "context is null");
        this.ticker = requireNonNull(context.ticker(), "ticker is null");
        this.config = requireNonNull(config, "config is null");
        this.model = context.config().name();
        this.oldest = config.strategy() == SequenceBatching.Strategy.OLDEST;
        this.iterative = config.iterative();
        this.batching = context.config().maxBatchSize() > 0;
        this.idleNanos = TimeUnit.MICROSECONDS.toNanos(config.maxSequenceIdleMicros());
        this.delayNanos = TimeUnit.MICROSECONDS.toNanos(config.maxQueueDelayMicros());
        int perInstance = Math.max(1, context.config().maxBatchSize());
        if (oldest && config.maxCandidateSequences() > 0) {
            perInstance = config.maxCandidateSequences();
        }
        int preferred = 0;
        for (int p : config.preferredBatchSizes()) {
            preferred = Math.max(preferred, p);
        }
        this.cap = oldest && preferred > 0 ? preferred : Integer.MAX_VALUE;
        this.slots = new Sequence[Math.max(1, context.instanceCount())][perInstance];
        for (SequenceBatching.State s : config.states()) {
            initialState.put(s.inputName(), initial(s, context.modelDirectory()));
        }
    }

    private Tensor initial(SequenceBatching.State s, @Nullable Path modelDir) {
        long[] shape = stateShape(s);
        long elements = 1;
        for (long d : s.dims()) {
            elements *= d;
        }
        int width = s.dataType().isFixedSize() ? s.dataType().byteSize() : 4; // BYTES zeros: empty strings
        long expected = elements * width;
        String file = s.initialStates().isEmpty() ? null : s.initialStates().getFirst().dataFile();
        if (file == null) {
            return Tensor.ofRaw(s.inputName(), s.dataType(), shape, new byte[Math.toIntExact(expected)]);
        }
        if (modelDir == null) {
            throw BackplaneException.invalid("model '" + model + "': initial state '" + s.inputName() + "' names data file '" + file
                    + "', but the model has no folder to read it from");
        }
        Path p = modelDir.resolve("initial_state").resolve(file);
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(p);
        } catch (IOException e) {
            throw BackplaneException.invalid("model '" + model + "': initial state '" + s.inputName() + "' cannot read its data file " + p + ": " + e);
        }
        if (s.dataType().isFixedSize() && bytes.length != expected) {
            throw BackplaneException.invalid("model '" + model + "': initial state data file " + p + " has " + bytes.length + " bytes; state '"
                    + s.inputName() + "' (" + s.dataType() + " " + s.dims() + ") needs " + expected);
        }
        return Tensor.ofRaw(s.inputName(), s.dataType(), shape, bytes);
    }

    private long[] stateShape(SequenceBatching.State s) {
        int off = batching ? 1 : 0;
        long[] shape = new long[s.dims().size() + off];
        if (batching) {
            shape[0] = 1;
        }
        for (int i = 0; i < s.dims().size(); i++) {
            shape[i + off] = s.dims().get(i);
        }
        return shape;
    }

    // ---- callers' threads ----

    @Override
    public void enqueue(ScheduledRequest r) {
        InferenceRequest q = r.request();
        boolean anonymous = iterative && q.correlationId().isEmpty();
        if (q.correlationId().isEmpty() && !anonymous) {
            throw BackplaneException.invalid("model '" + model + "' is a sequence model: every request needs a sequence id (the sequence_id"
                    + " parameter, a correlation id)");
        }
        if (batching && r.batchSize() != 1) {
            throw BackplaneException.invalid("model '" + model + "' is a sequence model: a request carries one item of its sequence (batch"
                    + " dimension 1), not " + r.batchSize());
        }
        Key key = keyOf(r);
        for (Control c : config.controls()) {
            if (c.kind() == SequenceBatching.ControlKind.CONTROL_SEQUENCE_CORRID && c.dataType() != DataType.BYTES && !key.number() && !anonymous) {
                throw BackplaneException.invalid("model '" + model + "' takes numeric sequence ids (control input '" + c.inputName() + "' is "
                        + c.dataType() + "), not the string " + key);
            }
        }
        long now = ticker.nanoTime();
        lock.lock();
        try {
            if (closed) {
                throw BackplaneException.unavailable("model '" + model + "' is unloading; sequence " + key + " has ended");
            }
            Sequence s = active.get(key);
            if (s != null && s.queue.isEmpty() && s.inFlight == null && idle(s, now)) {
                release(s, "was idle for more than " + config.maxSequenceIdleMicros() + " µs (max_sequence_idle_microseconds)");
                s = null;
            }
            if (s == null) {
                s = backlog.get(key);
            }
            if (s == null) {
                if (!q.isSequenceStart() && !anonymous) {
                    String why = released.get(key);
                    if (why != null) {
                        throw BackplaneException.invalid("sequence " + key + " of model '" + model + "' " + why
                                + "; it has ended: start it again with sequence_start");
                    }
                    throw BackplaneException.invalid("sequence " + key + " of model '" + model + "' is unknown: its first request must carry"
                            + " sequence_start (a sequence also ends when its model is unloaded or reloaded)");
                }
                released.remove(key);
                s = new Sequence(key);
                if (!assign(s)) {
                    backlog.put(key, s);
                }
            }
            s.queue.addLast(r);
            s.lastActivity = now;
            queuedRequests++;
            if (s.instance >= 0) {
                work.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** A request's sequence: its correlation id, or for an iterative request without one, the request itself. */
    private static Key keyOf(ScheduledRequest r) {
        InferenceRequest q = r.request();
        if (q.correlationId().isEmpty()) {
            return new Key(true, "request-" + r.id()); // never equal to a numeric id (digits only)
        }
        return new Key(q.correlationIdIsNumber(), q.correlationId());
    }

    /** Binds {@code s} to a free slot: the instance with the most free slots, its lowest free slot. False when none is free. */
    private boolean assign(Sequence s) {
        int best = -1;
        int bestFree = 0;
        for (int i = 0; i < slots.length; i++) {
            int free = 0;
            for (Sequence x : slots[i]) {
                if (x == null) {
                    free++;
                }
            }
            if (free > bestFree) {
                best = i;
                bestFree = free;
            }
        }
        if (best < 0) {
            return false;
        }
        Sequence[] row = slots[best];
        for (int j = 0; j < row.length; j++) {
            if (row[j] == null) {
                row[j] = s;
                s.instance = best;
                s.slot = j;
                active.put(s.key, s);
                inUse++;
                return true;
            }
        }
        throw new IllegalStateException("no free slot on instance " + best);
    }

    /** Frees {@code s}'s slot (exactly once: the slot is cleared only if it still holds {@code s}) and gives it to the backlog. */
    private void release(Sequence s, @Nullable String why) {
        if (s.instance >= 0 && slots[s.instance][s.slot] == s) {
            slots[s.instance][s.slot] = null;
            inUse--;
            active.remove(s.key);
            if (why != null) {
                released.put(s.key, why);
            }
            s.instance = -1;
            fillFromBacklog();
        }
    }

    private void fillFromBacklog() {
        Iterator<Sequence> it = backlog.values().iterator();
        while (it.hasNext()) {
            Sequence b = it.next();
            if (!assign(b)) {
                return;
            }
            it.remove();
            work.signalAll();
        }
    }

    private boolean idle(Sequence s, long now) {
        return idleNanos > 0 && now - s.lastActivity > idleNanos;
    }

    @Override
    public void cancelled(ScheduledRequest r) {
        lock.lock();
        try {
            Key key = keyOf(r);
            Sequence s = active.get(key);
            if (s == null) {
                s = backlog.get(key);
            }
            if (s != null && s.queue.remove(r)) {
                queuedRequests--;
                if (s.queue.isEmpty() && s.instance < 0) {
                    backlog.remove(key); // a sequence that never got a slot and has nothing left: forget it
                }
            }
        } finally {
            lock.unlock();
        }
    }

    // ---- workers ----

    @Override
    public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        return nextBatch(0, maxBatchSize, timeout, unit);
    }

    @Override
    public List<ScheduledRequest> nextBatch(int instance, int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        if (instance < 0 || instance >= slots.length) {
            throw new IllegalArgumentException("instance " + instance + " is not one of the " + slots.length + " instances of model '" + model + "'");
        }
        long deadline = ticker.nanoTime() + unit.toNanos(timeout);
        List<Sequence> taken = new ArrayList<>();
        List<ScheduledRequest> rejected = new ArrayList<>();
        List<ScheduledRequest> batch = new ArrayList<>();
        lock.lockInterruptibly();
        try {
            while (true) {
                if (closed) {
                    return List.of();
                }
                long now = ticker.nanoTime();
                if (iterative) {
                    settle(instance);
                }
                releaseIdle(now);
                long wait = form(instance, Math.min(maxBatchSize, cap), now, batch, taken);
                if (!batch.isEmpty()) {
                    break;
                }
                long left = deadline - now;
                if (left <= 0) {
                    return List.of();
                }
                long bounded = Math.min(wait, idleExpiry(now));
                waits++;
                work.awaitNanos(Math.min(left, bounded == Long.MAX_VALUE ? Long.MAX_VALUE : Math.min(bounded, MAX_WAIT_NANOS)));
            }
            for (int i = 0; i < batch.size(); i++) {
                ScheduledRequest r = batch.get(i);
                Sequence s = taken.get(i);
                queuedRequests--;
                s.lastActivity = ticker.nanoTime();
                if (iterative) {
                    s.inFlight = r; // released in settle() unless it comes back rescheduled
                } else if (r.request().isSequenceEnd()) {
                    if (s.queue.isEmpty()) {
                        release(s, null);
                    } else if (!s.queue.peekFirst().request().isSequenceStart()) {
                        // requests after the end that do not start it again: the sequence is over
                        while (!s.queue.isEmpty() && !s.queue.peekFirst().request().isSequenceStart()) {
                            rejected.add(s.queue.pollFirst());
                            queuedRequests--;
                        }
                        if (s.queue.isEmpty()) {
                            release(s, null);
                        }
                    }
                }
            }
        } finally {
            lock.unlock();
        }
        for (ScheduledRequest r : rejected) {
            context.reject(r, BackplaneException.invalid("sequence " + new Key(r.request().correlationIdIsNumber(), r.request().correlationId())
                    + " of model '" + model + "' ended before this request; start it again with sequence_start"));
        }
        for (int i = 0; i < batch.size(); i++) {
            prepare(batch.get(i), taken.get(i));
        }
        return batch;
    }

    /**
     * Forms {@code instance}'s batch into {@code batch} (one head per sequence) when it may leave
     * now; otherwise leaves it empty and returns how long to wait at most.
     */
    private long form(int instance, int max, long now, List<ScheduledRequest> batch, List<Sequence> taken) {
        Sequence[] row = slots[instance];
        List<Sequence> ready = new ArrayList<>();
        int activeHere = 0;
        long oldestArrival = Long.MAX_VALUE;
        for (Sequence s : row) {
            if (s == null) {
                continue;
            }
            activeHere++;
            ScheduledRequest head = s.queue.peekFirst();
            if (head != null) {
                ready.add(s);
                oldestArrival = Math.min(oldestArrival, head.arrivalNanos());
            }
        }
        if (ready.isEmpty()) {
            return Long.MAX_VALUE; // nothing to form: wait for an enqueue (which signals)
        }
        if (oldest) {
            ready.sort(Comparator.comparingLong(s -> s.queue.peekFirst().arrivalNanos()));
        }
        boolean full = ready.size() >= max || ready.size() == activeHere;
        long waited = now - oldestArrival;
        if (!full && delayNanos > 0 && waited < delayNanos) {
            return delayNanos - waited;
        }
        for (Sequence s : ready) {
            if (batch.size() >= max) {
                break;
            }
            batch.add(s.queue.pollFirst());
            taken.add(s);
        }
        return 0;
    }

    /**
     * Iterative sequences of {@code instance}: its previous batch has returned, and the core has
     * already given back every request that asked to be rescheduled; a sequence whose request did
     * not come back and that was its last (no id, or the end flag) ends here.
     */
    private void settle(int instance) {
        for (Sequence s : slots[instance]) {
            if (s != null && s.inFlight != null) {
                ScheduledRequest done = s.inFlight;
                s.inFlight = null;
                if (s.queue.isEmpty() && (done.request().correlationId().isEmpty() || done.request().isSequenceEnd())) {
                    release(s, null);
                }
            }
        }
    }

    @Override
    public void rescheduled(ScheduledRequest r) {
        if (!iterative) {
            enqueue(r);
            return;
        }
        lock.lock();
        try {
            Sequence s = active.get(keyOf(r));
            if (s == null || s.inFlight != r) {
                throw BackplaneException.unavailable("sequence " + keyOf(r) + " of model '" + model + "' ended while its request executed; it cannot"
                        + " be rescheduled");
            }
            s.inFlight = null;
            s.queue.addFirst(r);
            s.lastActivity = ticker.nanoTime();
            queuedRequests++;
            work.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** How many times workers waited for work, for tests. */
    long waits() {
        lock.lock();
        try {
            return waits;
        } finally {
            lock.unlock();
        }
    }

    /** How long until the first sequence that may be released for idleness expires ({@link Long#MAX_VALUE}: none can). */
    private long idleExpiry(long now) {
        if (idleNanos <= 0 || inUse == 0) {
            return Long.MAX_VALUE;
        }
        long first = Long.MAX_VALUE;
        for (Sequence[] row : slots) {
            for (Sequence s : row) {
                if (s != null && s.queue.isEmpty() && s.inFlight == null) {
                    first = Math.min(first, Math.max(1, s.lastActivity + idleNanos + 1 - now));
                }
            }
        }
        return first;
    }

    private void releaseIdle(long now) {
        if (idleNanos <= 0 || inUse == 0) {
            return;
        }
        for (Sequence[] row : slots) {
            for (Sequence s : row) {
                if (s != null && s.queue.isEmpty() && s.inFlight == null && idle(s, now)) {
                    release(s, "was idle for more than " + config.maxSequenceIdleMicros() + " µs (max_sequence_idle_microseconds)");
                }
            }
        }
    }

    /** Fills the control inputs and implicit state of a request leaving in a batch, and keeps its state output. */
    private void prepare(ScheduledRequest r, Sequence s) {
        InferenceRequest q = r.request();
        if (config.controls().isEmpty() && config.states().isEmpty()) {
            return;
        }
        List<Tensor> add = new ArrayList<>();
        long[] shape = batching ? new long[] {1, 1} : new long[] {1};
        for (Control c : config.controls()) {
            add.add(switch (c.kind()) {
                case CONTROL_SEQUENCE_START -> flag(c, shape, q.isSequenceStart());
                case CONTROL_SEQUENCE_END -> flag(c, shape, q.isSequenceEnd());
                case CONTROL_SEQUENCE_READY -> flag(c, shape, true);
                case CONTROL_SEQUENCE_CORRID -> corrid(c, shape, s.key);
            });
        }
        for (SequenceBatching.State st : config.states()) {
            Tensor kept = q.isSequenceStart() ? null : s.state.get(st.inputName());
            add.add(kept != null ? kept : requireNonNull(initialState.get(st.inputName()), "initial state"));
        }
        r.addInputs(add);
        if (!config.states().isEmpty()) {
            r.onResponse(response -> keepState(response, s));
        }
    }

    private InferenceResponse keepState(InferenceResponse response, Sequence s) {
        List<Tensor> out = new ArrayList<>(response.outputs().size());
        for (Tensor t : response.outputs()) {
            SequenceBatching.State st = stateOfOutput(t.name());
            if (st == null) {
                out.add(t);
            } else {
                s.state.put(st.inputName(), t.copyToHeap().withName(st.inputName()));
            }
        }
        return out.size() == response.outputs().size() ? response : InferenceResponse.of(out, response.parameters());
    }

    private SequenceBatching.@Nullable State stateOfOutput(String name) {
        for (SequenceBatching.State st : config.states()) {
            if (st.outputName().equals(name)) {
                return st;
            }
        }
        return null;
    }

    private static Tensor flag(Control c, long[] shape, boolean on) {
        double v = c.falseTrue().get(on ? 1 : 0);
        return switch (c.dataType()) {
            case INT32 -> Tensor.ofInts(c.inputName(), shape, (int) v);
            case FP32 -> Tensor.ofFloats(c.inputName(), shape, (float) v);
            default -> Tensor.ofBooleans(c.inputName(), shape, v != 0);
        };
    }

    private static Tensor corrid(Control c, long[] shape, Key key) {
        if (c.dataType() == DataType.BYTES) {
            return Tensor.ofStrings(c.inputName(), shape, key.id());
        }
        long id = Long.parseUnsignedLong(key.id());
        return switch (c.dataType()) {
            case INT32, UINT32 -> Tensor.ofRaw(c.inputName(), c.dataType(), shape,
                    ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt((int) id).array());
            default -> Tensor.ofRaw(c.inputName(), c.dataType(), shape, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(id).array());
        };
    }

    // ---- the core ----

    @Override
    public void instanceFailed(int instance) {
        if (instance < 0 || instance >= slots.length) {
            return;
        }
        List<ScheduledRequest> failed = new ArrayList<>();
        List<Key> ended = new ArrayList<>();
        lock.lock();
        try {
            for (Sequence s : slots[instance]) {
                if (s != null) {
                    failed.addAll(s.queue);
                    queuedRequests -= s.queue.size();
                    s.queue.clear();
                    ended.add(s.key);
                    release(s, "lost its state when instance " + instance + " of the model failed");
                }
            }
        } finally {
            lock.unlock();
        }
        for (ScheduledRequest r : failed) {
            context.reject(r, BackplaneException.unavailable("sequence " + new Key(r.request().correlationIdIsNumber(), r.request().correlationId())
                    + " of model '" + model + "' lost its state when instance " + instance + " failed; start it again with sequence_start"));
        }
    }

    @Override
    public List<ScheduledRequest> drain() {
        lock.lock();
        try {
            List<ScheduledRequest> out = new ArrayList<>(queuedRequests);
            for (Sequence s : active.values()) {
                out.addAll(s.queue);
                s.queue.clear();
            }
            for (Sequence s : backlog.values()) {
                out.addAll(s.queue);
            }
            backlog.clear();
            for (Sequence[] row : slots) {
                for (Sequence s : row) {
                    if (s != null) {
                        release(s, "ended when the model was unloaded");
                    }
                }
            }
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
    public int sequenceSlotsInUse() {
        lock.lock();
        try {
            return inUse;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            work.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
