package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.host.HostListener.Outcome;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The only door between one model version and its {@link Batcher} plugin. Owns B1 (a request is
 * dispatched at most once: every dispatch is the request's {@code QUEUED → DISPATCHED} CAS), B2
 * (a batch is never empty and never over {@code max_batch_size}) and B8 (a batcher that throws,
 * or returns foreign, duplicate or ended requests, costs per-request errors and log lines, never a
 * worker or a second execution).
 *
 * <p>With {@code preserve_ordering} the instance workers take and guard batches one at a time
 * under {@link #dispatchLock}, and every dispatched request reserves its {@link ResponseOrder}
 * slot here, so slots are reserved in the order batches leave the batcher (B3).
 */
final class BatchGuard implements InstanceSlot.BatchSource {
    private static final Logger log = LoggerFactory.getLogger(BatchGuard.class);

    private final RequestState.Origin origin;
    private final Batcher batcher;
    private final int maxBatch;
    private final @Nullable ResponseOrder order;
    private final @Nullable ReentrantLock dispatchLock;

    BatchGuard(RequestState.Origin origin, Batcher batcher, int maxBatch) {
        this.origin = requireNonNull(origin, "origin is null");
        this.batcher = requireNonNull(batcher, "batcher is null");
        this.maxBatch = maxBatch;
        this.order = origin.order();
        this.dispatchLock = order == null ? null : new ReentrantLock();
    }

    private String model() {
        return origin.model();
    }

    /** Queues an admitted request; a batcher that throws rejects it (the error goes to that request only). */
    void enqueue(RequestState r) {
        try {
            batcher.enqueue(r);
        } catch (Throwable t) {
            if (r.tryWithdraw()) {
                BackplaneException e = t instanceof BackplaneException be ? be
                        : BackplaneException.wrap(t, "the batcher of model '" + model() + "' failed to queue " + r.describe());
                r.terminate(e, Outcome.REJECTED, "enqueue-rejected");
            }
        }
    }

    /** Whether nothing waits in the batcher's queue; false when the batcher cannot tell. */
    @Override
    public boolean isIdle() {
        try {
            return batcher.queued() == 0;
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to count its queue", model(), t);
            return false;
        }
    }

    /** Requests waiting in the batcher's queue; 0 when the batcher cannot tell. */
    int queued() {
        try {
            return batcher.queued();
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to count its queue", model(), t);
            return 0;
        }
    }

    /**
     * Takes queued {@code r} back for a caller that will run it on its own thread: only from a
     * batcher that can give it back atomically ({@link Withdrawable}), and never with
     * {@code preserve_ordering} (its slots are reserved in the order batches leave the batcher).
     */
    @Override
    public boolean withdraw(RequestState r) {
        if (dispatchLock != null || !(batcher instanceof Withdrawable w)) {
            return false;
        }
        try {
            return w.withdraw(r);
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to give back {}", model(), r.describe(), t);
            return false;
        }
    }

    /** The caller of queued {@code r} will not run it: a batcher that queued it quietly wakes a worker ({@link Withdrawable#handOver}). */
    void handOver(RequestState r) {
        if (batcher instanceof Withdrawable w) {
            try {
                w.handOver(r);
            } catch (Throwable t) {
                log.warn("the batcher of model '{}' failed to hand over {}", model(), r.describe(), t);
            }
        }
    }

    /** A queued request was withdrawn by the core (cancel): tell the batcher. */
    void cancelled(RequestState r) {
        try {
            batcher.cancelled(r);
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed on cancel of {}", model(), r.describe(), t);
        }
    }

    /** Empties the batcher's queue (unload): its requests of this version, not yet ended or dispatched by anyone. */
    List<RequestState> drain() {
        List<RequestState> out = new ArrayList<>();
        try {
            for (ScheduledRequest q : batcher.drain()) {
                if (q instanceof RequestState r && r.belongsTo(origin)) {
                    out.add(r);
                }
            }
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to drain", model(), t);
        }
        return out;
    }

    @Override
    public void reschedule(RequestState r) {
        try {
            batcher.rescheduled(r);
        } catch (Throwable t) {
            if (r.tryWithdraw()) {
                BackplaneException e = t instanceof BackplaneException be ? be
                        : BackplaneException.wrap(t, "the batcher of model '" + model() + "' failed to reschedule " + r.describe());
                r.terminate(e, Outcome.REJECTED, "reschedule-rejected");
            }
        }
    }

    @Override
    public void instanceFailed(int instance) {
        try {
            batcher.instanceFailed(instance);
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed on the failure of instance {}", model(), instance, t);
        }
    }

    /** Sequence slots the batcher holds now; 0 when it cannot tell. */
    int sequenceSlotsInUse() {
        try {
            return batcher.sequenceSlotsInUse();
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to count its sequence slots", model(), t);
            return 0;
        }
    }

    void close() {
        try {
            batcher.close();
        } catch (Throwable t) {
            log.warn("the batcher of model '{}' failed to close", model(), t);
        }
    }

    @Override
    public List<RequestState> next(int instance, long timeout, TimeUnit unit) throws InterruptedException {
        ReentrantLock ordered = dispatchLock;
        if (ordered != null && !ordered.tryLock(timeout, unit)) {
            return List.of();
        }
        try {
            return guard(batcher.nextBatch(instance, maxBatch, timeout, unit));
        } finally {
            if (ordered != null) {
                ordered.unlock();
            }
        }
    }

    @Override
    public boolean dispatch(RequestState r) {
        if (!r.tryDispatch(origin.host().ticker().nanoTime())) {
            return false;
        }
        if (!r.warmUp()) {
            origin.host().listener().batchExecuted(origin.model(), origin.version(), 1, r.batchSize());
        }
        return true;
    }

    /**
     * Checks a batch from the batcher and takes its requests for execution: foreign, duplicate and
     * ended requests are dropped; requests past the size limit end with an error.
     */
    List<RequestState> guard(@Nullable List<ScheduledRequest> raw) {
        if (raw == null || raw.isEmpty()) {
            return List.of();
        }
        List<RequestState> out = new ArrayList<>(raw.size());
        Set<RequestState> seen = raw.size() > 16 ? Collections.newSetFromMap(new IdentityHashMap<>()) : null;
        int total = 0;
        int counted = 0; // requests and batch items that are not warm-up: what the listeners see
        int countedSize = 0;
        long now = origin.host().ticker().nanoTime();
        for (ScheduledRequest s : raw) {
            if (!(s instanceof RequestState r) || !r.belongsTo(origin)) {
                log.error("the batcher of model '{}' version {} returned {}, which is not a queued request of this model; dropped", model(),
                        origin.version(), s);
                if (s instanceof RequestState foreign && foreign.withdraw()) {
                    // a batcher that hands out another model's request has lost track of it: end it rather than leave its caller waiting
                    foreign.terminate(BackplaneException.internal("the batcher of model '" + model() + "' version " + origin.version() + " returned "
                            + foreign.describe() + " in one of its batches; it was not executed"), Outcome.OTHER, "batch-guard-foreign");
                }
                continue;
            }
            if (seen != null ? !seen.add(r) : out.contains(r)) {
                log.error("the batcher of model '{}' returned {} twice in one batch; it runs once", model(), r.describe());
                continue;
            }
            if (total + r.batchSize() > maxBatch) {
                if (r.tryWithdraw()) {
                    r.terminate(BackplaneException.internal("the batcher of model '" + model() + "' formed a batch over max_batch_size " + maxBatch
                            + "; " + r.describe() + " was not executed"), Outcome.OTHER, "batch-guard");
                }
                continue;
            }
            if (!r.tryDispatch(now)) {
                continue; // cancelled, timed out, or already executed
            }
            ResponseOrder.Ticket ticket = r.ticket();
            if (order != null && ticket != null) {
                order.reserve(ticket);
            }
            total += r.batchSize();
            out.add(r);
            if (!r.warmUp()) {
                counted++;
                countedSize += r.batchSize();
            }
        }
        if (counted > 0) {
            origin.host().listener().batchExecuted(origin.model(), origin.version(), counted, countedSize);
        }
        return out;
    }
}
