package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The live executions of one stub generation and the one way each of their requests ends: results
 * and decoupled responses are matched to their request here, and every path that ends a request
 * (its FINAL, an error, a stall, the stub's death, a cancellation) goes through {@link #finish}.
 *
 * <p>Owns <b>P2</b>'s matching half: a result or RESPONSE frame that names an unknown or abandoned
 * execution, an older generation or an ended request is dropped (counted, and acknowledged),
 * never delivered to another request. Owns <b>P3</b>'s "each exactly once": {@link #finish} ends a
 * request by a compare-and-set on {@link StubRequest#hostDone}, and {@link #failAll} abandons every
 * execution before it ends its requests. It frees memory only through {@link ExecutionMemory}
 * (<b>P4</b>) and returns response credits only through {@link ResponseCredits} (<b>P9</b>).
 * Callers hold the region's read lock where a method takes the region.
 */
final class ExecutionTable {
    private final int generation;
    private final boolean decoupled;
    private final String tag;
    private final Supplier<String> describe;
    private final StubSettings settings;
    private final AtomicBoolean dead;
    private final ExecutionMemory memory;
    private final ResponseCredits credits;
    private final Consumer<String> kill;
    private final ConcurrentHashMap<Long, StubExecution> executions = new ConcurrentHashMap<>();
    /** Requests that were rescheduled and may still be open (see {@link #reschedule}). */
    private final ConcurrentLinkedQueue<StubRequest> rescheduled = new ConcurrentLinkedQueue<>();
    private final AtomicLong droppedMessages = new AtomicLong();

    /**
     * @param describe the connection's description for error messages (it names the stub's pid)
     * @param kill     kills the stub with a reason: a result that breaks the protocol
     */
    ExecutionTable(int generation, boolean decoupled, String tag, Supplier<String> describe, StubSettings settings, AtomicBoolean dead,
            ExecutionMemory memory, ResponseCredits credits, Consumer<String> kill) {
        this.generation = generation;
        this.decoupled = decoupled;
        this.tag = tag;
        this.describe = describe;
        this.settings = settings;
        this.dead = dead;
        this.memory = memory;
        this.credits = credits;
        this.kill = kill;
    }

    @Nullable StubExecution get(long id) {
        return executions.get(id);
    }

    /** Registers a posted execution (execute's thread). */
    void put(StubExecution e) {
        executions.put(e.id, e);
    }

    Collection<StubExecution> values() {
        return executions.values();
    }

    /** Late messages dropped because no live request matched them. */
    long droppedMessages() {
        return droppedMessages.get();
    }

    boolean hasOpenRequests() {
        for (StubExecution e : executions.values()) {
            for (StubRequest r : e.reqs) {
                if (!r.hostDone.get()) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Reads the result of {@code e} from the region (the control block {@code ctl} points at it);
     * delivers it unless the execution was abandoned. A result that breaks the protocol fails the
     * execution's requests and kills the stub.
     */
    void processResult(SharedRegion reg, MemorySegment ctl, StubExecution e, boolean deliver) {
        if (e.resultSeen) {
            return;
        }
        try {
            Wire.In in = ExecutionCodec.openResult(reg, ctl, generation, e);
            int n = e.reqs.size();
            List<InferenceResponse> finals = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                int state = in.u8();
                switch (state) {
                    case 0 -> finals.add(null);
                    case 1 -> finals.add(ExecutionCodec.decodeResponse(reg, in, e.reqs.get(i)));
                    case 2 -> finals.add(null);
                    case 3 -> {
                        finals.add(null);
                        e.reqs.get(i).rescheduled = true;
                    }
                    default -> throw Wire.protocol("request state " + state + " is unknown");
                }
                if (state != 0) {
                    e.reqs.get(i).stubDone = true;
                }
            }
            e.resultSeen = true;
            for (int i = 0; i < n; i++) {
                InferenceResponse resp = finals.get(i);
                StubRequest r = e.reqs.get(i);
                if (r.rescheduled && deliver) {
                    reschedule(r);
                }
                if (resp != null) {
                    if (deliver) {
                        finish(r, resp);
                    } else {
                        droppedMessages.incrementAndGet();
                    }
                }
            }
        } catch (BackplaneException ex) {
            e.resultSeen = true;
            for (StubRequest r : e.reqs) {
                r.stubDone = true;
                finish(r, InferenceResponse.error(new BackplaneException(ErrorCode.INTERNAL, describe.get() + ": " + ex.getMessage(), ex)));
            }
            kill.accept(ex.getMessage());
        }
        memory.messageDone(reg, e);
        for (StubRequest r : e.reqs) {
            maybeRelease(reg, r);
        }
    }

    /** A RESPONSE frame (reader thread, region read-locked): a decoupled response, or a plain model's late one. */
    void onResponse(SharedRegion reg, MemorySegment payload) {
        Wire.In in = new Wire.In(payload);
        long gen = in.u32();
        long execId = in.u64();
        int index = in.u16();
        boolean fin = in.u8() == 1;
        boolean has = in.u8() == 1;
        StubExecution e = executions.get(execId);
        StubRequest r = e != null && gen == generation && index < e.reqs.size() ? e.reqs.get(index) : null;
        InferenceResponse resp = null;
        if (has) {
            resp = r == null ? ExecutionCodec.skipResponse(reg, in) : ExecutionCodec.decodeResponse(reg, in, r);
        }
        long token = in.u64();
        // Every response is acknowledged: the ACK frees the stub's blocks (token != 0) and
        // returns the response credit the stub spent on it (flow control, DESIGN P9). A
        // non-final response that reached its request is acknowledged only once the request's
        // consumer is ready for more, so a slow client holds the credits and slows the model;
        // a FINAL, an error and a dropped response are acknowledged at once.
        byte[] ack = ResponseCredits.ack(token);
        if (r == null) {
            credits.returnNow(ack);
            droppedMessages.incrementAndGet();
            ControlChannel.log.debug("{}: dropped a response for unknown execution {} index {} (generation {})", tag, execId, index, gen);
            return;
        }
        if (fin) {
            r.stubDone = true;
        }
        CompletionStage<Void> consumer = null;
        try {
            if (e.abandoned || r.hostDone.get()) {
                droppedMessages.incrementAndGet();
            } else if (fin) {
                finish(r, resp);
            } else if (resp != null) {
                try {
                    r.sr.sender().send(resp, 0);
                    consumer = resp.isError() ? null : credits.consumerReady(r);
                } catch (IllegalStateException ex) {
                    ControlChannel.log.debug("{}: response for a closed request dropped", tag, ex);
                }
            }
        } finally {
            credits.returnWhen(ack, consumer);
        }
        if (fin) {
            maybeRelease(reg, r);
        }
    }

    /**
     * The model released {@code r} with RESCHEDULE: the core runs it again after this execute
     * returns, under a new request. This one stays open, so that a response the stub sent through it
     * before the release, and that the reader thread has yet to handle, still reaches the request;
     * {@link #settleRescheduled} retires it once the request has ended.
     */
    private void reschedule(StubRequest r) {
        try {
            r.sr.reschedule();
        } catch (RuntimeException ex) {
            r.rescheduled = false;
            finish(r, InferenceResponse.error(BackplaneException.wrap(ex, describe.get() + " cannot reschedule request " + r.sr.id())));
            return;
        }
        rescheduled.add(r);
    }

    /** Retires the requests of rescheduled requests that have ended since (worker thread, region read-locked). */
    void settleRescheduled(SharedRegion reg) {
        for (Iterator<StubRequest> it = rescheduled.iterator(); it.hasNext(); ) {
            StubRequest r = it.next();
            if (r.sr.sender().isClosed()) {
                it.remove();
                r.hostDone.set(true);
                maybeRelease(reg, r);
            }
        }
    }

    /** Ends {@code r} with {@code resp} (null: FINAL without a response) unless it already ended. */
    void finish(StubRequest r, @Nullable InferenceResponse resp) {
        if (!r.hostDone.compareAndSet(false, true)) {
            return;
        }
        try {
            r.sr.sender().send(resp, ResponseSender.FINAL);
        } catch (RuntimeException ex) {
            ControlChannel.log.debug("{}: request {} had already ended", tag, r.sr.id(), ex);
        }
        StubExecution e = r.exec;
        Thread w = decoupled ? null : e.waiter;
        if (w != null && w != Thread.currentThread()) {
            LockSupport.unpark(w); // awaitSenders
        }
        if (e.resultSeen && allSettled(e)) {
            executions.remove(e.id, e);
        }
    }

    /** Ends a request that never reached the stub. */
    static void failDirect(ScheduledRequest sr, BackplaneException err) {
        try {
            sr.sender().sendError(err);
        } catch (RuntimeException ex) {
            ControlChannel.log.debug("request {} had already ended", sr.id(), ex);
        }
    }

    /** Abandons every execution and fails each open request with {@code err} (stall, death). */
    void failAll(BackplaneException err) {
        for (StubExecution e : executions.values()) {
            e.abandoned = true;
            for (StubRequest r : e.reqs) {
                finish(r, InferenceResponse.error(err));
            }
            e.failed.countDown();
            Thread w = e.waiter;
            if (w != null) {
                LockSupport.unpark(w);
            }
        }
    }

    void maybeRelease(SharedRegion reg, StubRequest r) {
        memory.releaseIfDone(reg, r);
        StubExecution e = r.exec;
        if (e.resultSeen && allSettled(e)) {
            executions.remove(e.id, e);
        }
    }

    private static boolean allSettled(StubExecution e) {
        for (StubRequest r : e.reqs) {
            if (!r.freed.get() || !r.hostDone.get()) {
                return false;
            }
        }
        return true;
    }

    /**
     * A plain model may return None from execute() and send a request's one response and FINAL
     * later through its response sender (Triton allows it): the batch is not over until each
     * request ended, so the core's missing-response rule (L6) sees only real omissions. A
     * cancelled request ends at once with CANCELLED. Ends early when the host interrupts the
     * worker (unload, watchdog) or the stub dies; those paths fail what is still open.
     */
    void awaitSenders(StubExecution e) {
        while (!dead.get() && !e.abandoned && !Thread.currentThread().isInterrupted()) {
            boolean open = false;
            for (StubRequest r : e.reqs) {
                if (!r.hostDone.get() && r.sr.isCancelled()) {
                    // The client gave up: end it now; a late FINAL from the stub is dropped. Its memory
                    // stays quarantined until the stub sends that FINAL or ends.
                    finish(r, InferenceResponse.error(new BackplaneException(ErrorCode.CANCELLED, "request " + r.sr.id()
                            + " was cancelled while " + describe.get() + " had yet to answer it through its response sender")));
                }
                if (!r.hostDone.get()) {
                    open = true;
                }
            }
            if (!open) {
                return;
            }
            LockSupport.parkNanos(e, 50_000_000);
        }
    }

    /**
     * The stub died or stalled: the thread that noticed fails every open request (failAll), and
     * execute must not return before that thread has ended this execution's requests, or the host
     * would find them unanswered (L6) and answer them itself with the wrong error.
     */
    void awaitFailed(StubExecution e) {
        try {
            if (e.failed.await(settings.heartbeatTimeoutMillis() + 5_000, TimeUnit.MILLISECONDS)) {
                return;
            }
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
        BackplaneException err = BackplaneException.unavailable(describe.get() + " stopped serving while requests were in flight");
        for (StubRequest r : e.reqs) {
            finish(r, InferenceResponse.error(err));
        }
    }
}
