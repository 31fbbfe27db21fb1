package io.backplane.core.internal;

import java.util.ArrayDeque;
import org.jspecify.annotations.Nullable;

/**
 * The reorder stage of a model with {@code preserve_ordering} (B3): final responses leave in the
 * order their requests were dispatched, which for one priority level is arrival order, across
 * every instance.
 *
 * <p>Each request of an ordered model carries a {@link Ticket}, whose state only this class
 * reads or writes, under its monitor. {@link BatchGuard} reserves a slot for each ticket it
 * dispatches, in dispatch order (the instance workers of an ordered model form and guard batches
 * one at a time). A request's terminal delivery — a FINAL, or any error the core sends (execute
 * failure, missing response, instance failure, unload deadline) — fills its slot; the head slots
 * that are filled are delivered, in order, by whichever thread filled the head. Every dispatched
 * request ends exactly once (L1), so every slot fills and nothing waits forever. Requests that end
 * before they are dispatched (cancel, queue timeout, rejection) never take a slot and are
 * delivered at once.
 *
 * <p>Only the delivery waits: the request's hold on the model version is released when it ends
 * (L3), before its response is held here. Thread-safe.
 */
final class ResponseOrder {
    private final ArrayDeque<Ticket> slots = new ArrayDeque<>();
    private boolean draining;

    /** One request's place in the order; its fields are guarded by the owning {@link ResponseOrder}. */
    static final class Ticket {
        private boolean slotted;
        private boolean ended;
        private @Nullable Runnable held;

        private Ticket() {
        }
    }

    /** A ticket for a request just admitted. */
    Ticket ticket() {
        return new Ticket();
    }

    /** Reserves the next slot for {@code t}, just dispatched; skipped if its request already ended (it was delivered directly). */
    synchronized void reserve(Ticket t) {
        if (t.ended) {
            return;
        }
        t.slotted = true;
        slots.addLast(t);
    }

    /** Delivers {@code t}'s terminal response now, or when every earlier slot has delivered. {@code delivery} must not throw. */
    void deliver(Ticket t, Runnable delivery) {
        boolean direct;
        synchronized (this) {
            t.ended = true;
            direct = !t.slotted; // never dispatched: not ordered
            if (!direct) {
                t.held = delivery;
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
                Ticket head = slots.peekFirst();
                if (head == null || head.held == null) {
                    draining = false;
                    return;
                }
                slots.pollFirst();
                next = head.held;
                head.held = null;
            }
            next.run();
        }
    }

    /** Slots reserved and not yet delivered (tests, diagnostics). */
    synchronized int pending() {
        return slots.size();
    }
}
