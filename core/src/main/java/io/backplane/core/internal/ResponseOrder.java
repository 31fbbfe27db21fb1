package io.backplane.core.internal;

import java.util.ArrayDeque;

/**
 * The reorder stage of a model with {@code preserve_ordering} (B3): final responses leave in the
 * order their requests were dispatched, which for one priority level is arrival order, across
 * every instance.
 *
 * <p>{@link ModelVersion#guard} reserves a slot for each request it dispatches, in dispatch order
 * (the instance workers of an ordered model form and guard batches one at a time). A request's
 * terminal delivery — a FINAL, or any error the core sends (execute failure, missing response,
 * instance failure, unload deadline) — fills its slot; the head slots that are filled are
 * delivered, in order, by whichever thread filled the head. Every dispatched request ends exactly
 * once (L1), so every slot fills and nothing waits forever. Requests that end before they are
 * dispatched (cancel, queue timeout, rejection) never take a slot and are delivered at once.
 *
 * <p>Only the delivery waits: the request's hold on the model version is released when it ends
 * (L3), before its response is held here. Thread-safe; the per-request fields it uses in
 * {@link RequestState} are guarded by this object's monitor.
 */
final class ResponseOrder {
    private final ArrayDeque<RequestState> slots = new ArrayDeque<>();
    private boolean draining;

    /** Reserves the next slot for {@code r}, just dispatched; skipped if {@code r} already ended (it was delivered directly). */
    synchronized void reserve(RequestState r) {
        if (r.orderEnded) {
            return;
        }
        r.orderSlotted = true;
        slots.addLast(r);
    }

    /** Delivers {@code r}'s terminal response now, or when every earlier slot has delivered. */
    void deliver(RequestState r, Runnable delivery) {
        boolean direct;
        synchronized (this) {
            r.orderEnded = true;
            direct = !r.orderSlotted; // never dispatched: not ordered
            if (!direct) {
                r.orderHeld = delivery;
                if (draining) {
                    return; // the draining thread delivers it in turn
                }
                draining = true;
            }
        }
        if (direct) {
            delivery.run();
        } else {
            drain();
        }
    }

    private void drain() {
        while (true) {
            Runnable next;
            synchronized (this) {
                RequestState head = slots.peekFirst();
                if (head == null || head.orderHeld == null) {
                    draining = false;
                    return;
                }
                slots.pollFirst();
                next = head.orderHeld;
                head.orderHeld = null;
            }
            next.run(); // never throws: RequestState wraps every delivery
        }
    }

    /** Slots reserved and not yet delivered (tests, diagnostics). */
    synchronized int pending() {
        return slots.size();
    }
}
