package io.backplane.core.internal;

import java.util.ArrayDeque;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * Ensemble steps without a thread hand-off: a thread that may run models runs the ensemble's
 * ready steps itself, one after the other, when their instances are idle, instead of handing each
 * step to its model's worker (a thread wake-up each). Two kinds of thread have a trampoline:
 * <ul>
 *   <li>an instance worker of the core, after each batch: it runs a downstream step only while its
 *       own model has nothing queued and the step's instance has been quick lately
 *       ({@link InstanceSlot#isQuick}), so it never keeps its own requests waiting for long, and a
 *       slow step always goes to its own worker; never to a step whose model has started child
 *       requests (BLS), whose wait for a child could need the very worker it borrowed;</li>
 *   <li>with {@code callerRuns(true)}, the ordinary caller admitting an ensemble request: it runs
 *       every step whose instance is idle, as caller-runs does for a direct request.</li>
 * </ul>
 *
 * <p>A step that becomes ready while this thread is inside an {@code execute} (the upstream step
 * just sent its response) is not started there: it is deferred until that {@code execute} has
 * returned and released its instance, so executes never nest, an instance's watchdog never counts
 * another model's time, and the stack stays flat. Only launches of steps whose upstream response
 * arrived on this thread are deferred; nothing on this thread waits for them, so deferral cannot
 * deadlock. A thread without a trampoline (a backend's own thread, a frontend event loop, any
 * thread when caller-runs is off) starts steps at once, and they queue for their models' workers.
 *
 * <p>Confined to one thread; no synchronization.
 */
final class StepTrampoline {
    private static final ThreadLocal<@Nullable StepTrampoline> CURRENT = new ThreadLocal<>();

    private final ArrayDeque<Runnable> deferred = new ArrayDeque<>();
    /** The worker's own queue is empty; null on a caller's thread. */
    private final @Nullable BooleanSupplier workerIdle;
    private int executing;

    private StepTrampoline(@Nullable BooleanSupplier workerIdle) {
        this.workerIdle = workerIdle;
    }

    /**
     * Runs {@code body} on this thread with a trampoline, then the step launches deferred meanwhile,
     * in order (each may defer more). Nested calls run {@code body} within the outer trampoline.
     * {@code workerIdle}: for an instance worker, whether its own queue is empty; null for a caller.
     */
    static void run(@Nullable BooleanSupplier workerIdle, Runnable body) {
        if (CURRENT.get() != null) {
            body.run();
            return;
        }
        StepTrampoline t = new StepTrampoline(workerIdle);
        CURRENT.set(t);
        try {
            body.run();
            Runnable next;
            while ((next = t.deferred.poll()) != null) {
                next.run();
            }
        } finally {
            CURRENT.remove();
        }
    }

    /** Defers {@code launch} until this thread's current work returns; false (nothing done) when this thread has no trampoline. */
    static boolean defer(Runnable launch) {
        StepTrampoline t = CURRENT.get();
        if (t == null) {
            return false;
        }
        t.deferred.add(launch);
        return true;
    }

    /**
     * Whether an ensemble step admitted now may execute on this thread, on an instance that is
     * {@code quick} (lately short executes, a model that never waits for child requests) or not:
     * this thread has a trampoline and runs no execute, and, on a worker, its own queue is empty and
     * the instance quick.
     */
    static boolean mayRunStepInline(boolean quick) {
        StepTrampoline t = CURRENT.get();
        if (t == null || t.executing != 0) {
            return false;
        }
        BooleanSupplier idle = t.workerIdle;
        return idle == null || quick && idle.getAsBoolean();
    }

    /** An execute starts on this thread; returns the trampoline to pass to {@link #executeEnded}, or null. */
    static @Nullable StepTrampoline executeStarted() {
        StepTrampoline t = CURRENT.get();
        if (t != null) {
            t.executing++;
        }
        return t;
    }

    static void executeEnded(@Nullable StepTrampoline t) {
        if (t != null) {
            t.executing--;
        }
    }
}
