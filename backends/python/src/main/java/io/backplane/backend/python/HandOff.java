package io.backplane.backend.python;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * The hand-off of an execution through the control block: the host posts it by writing the message
 * words and bumping {@code TO_STUB_SEQ}, wakes the stub only when it sleeps (a futex wake, or a WAKE
 * frame for a stub on the socket), then spins while {@link Cores} grants a spin and sleeps on
 * {@code REPLY_SEQ}'s futex (or parks for WAKE_HOST) until the result is posted.
 *
 * <p>The store-then-load pairs on both sides are separated by full fences (volatile accesses here,
 * a lock-prefixed atomic in Python), so no wake-up is lost; the sleep is bounded so that a dead
 * stub, an abandoned execution or an interrupt is seen. This is the fast path of <b>P2</b> (tensors
 * and messages through the region, the socket only for wake-ups); it never holds a lock (<b>P9</b>)
 * and, on an interrupt from the host, abandons the execution through the callback it was given,
 * never deciding a stub's health itself (that is {@link Liveness}, <b>P3</b>).
 */
final class HandOff {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    /** How much longer than {@code spin_us} a side spins after it had to wake the other ({@link #awaitReply}). */
    static final int AFTER_WAKE_SPIN_FACTOR = 4;

    private final StubSettings settings;
    private final AtomicBoolean dead;
    private final ControlChannel channel;
    private final Consumer<String> abandon;
    private final MemorySegment futexTimeout = Futex.timeout(Arena.ofAuto(), 20);
    /** Wake-ups the host sent to a sleeping stub (futex wakes and WAKE frames); execute's thread writes it. */
    private final AtomicLong stubWakeupsSent = new AtomicLong();
    private MemorySegment ctl = MemorySegment.NULL;

    /**
     * @param abandon called with a reason when the host interrupts a wait (its watchdog, unload):
     *     the execution is abandoned like a stall
     */
    HandOff(StubSettings settings, AtomicBoolean dead, ControlChannel channel, Consumer<String> abandon) {
        this.settings = settings;
        this.dead = dead;
        this.channel = channel;
        this.abandon = abandon;
    }

    /** The control block, once the region exists (start-up thread, before any execution). */
    void attach(MemorySegment control) {
        this.ctl = control;
    }

    /** Whether both sides of this connection wake each other through futexes (else through the socket). */
    boolean futexWakeups() {
        MemorySegment c = ctl;
        return c != MemorySegment.NULL && c.get(ValueLayout.JAVA_LONG, Wire.W_HOST_FUTEX) == 1L
                && (long) LONG.getVolatile(c, Wire.W_STUB_FUTEX) == 1L;
    }

    long stubWakeupsSent() {
        return stubWakeupsSent.get();
    }

    /**
     * Posts {@code e}, whose message ({@code msgLen} bytes) is in {@code msgBlock}, and waits for its
     * result. Returns true when the result is posted, false when the execution was abandoned, the
     * stub died or the host interrupted the wait. Execute's thread only.
     */
    boolean post(StubExecution e, SharedRegion.Block msgBlock, long msgLen) {
        ctl.set(ValueLayout.JAVA_LONG, Wire.W_MSG_CHUNK, msgBlock.chunk());
        ctl.set(ValueLayout.JAVA_LONG, Wire.W_MSG_OFF, msgBlock.offset());
        ctl.set(ValueLayout.JAVA_LONG, Wire.W_MSG_LEN, msgLen);
        // How long the stub may spin for its next execution once this one is done: decided by the
        // cores free now, for every stub of this JVM together (Cores).
        ctl.set(ValueLayout.JAVA_LONG, Wire.W_STUB_SPIN_NS, Cores.stubSpinNanos(settings.spinMicros() * 1000));
        Cores.executionPosted();
        try {
            LONG.setVolatile(ctl, Wire.W_TO_STUB_SEQ, e.seq);
            long waiting = (long) LONG.getVolatile(ctl, Wire.W_STUB_WAITING);
            if (waiting == Wire.WAITING_FUTEX) {
                stubWakeupsSent.incrementAndGet();
                Futex.wakeAll(ctl.asSlice(Wire.W_TO_STUB_SEQ, 4));
            } else if (waiting != 0) {
                stubWakeupsSent.incrementAndGet();
                channel.trySend(Wire.F_WAKE, new byte[0]);
            }
            return awaitReply(e, waiting != 0);
        } finally {
            Cores.executionReturned();
        }
    }

    /** Whether the result of {@code e} is posted (the monitor's check for an abandoned execution that ended late). */
    boolean replied(StubExecution e) {
        return (long) LONG.getVolatile(ctl, Wire.W_REPLY_SEQ) == e.seq;
    }

    /**
     * Waits for the stub's result: spins while {@link Cores} grants a spin (never with more busy
     * stubs and spinning host threads than free cores), then sleeps on the reply word's futex (or
     * parks for the socket's WAKE_HOST where the stub or the JVM has no futex).
     */
    private boolean awaitReply(StubExecution e, boolean wokeStub) {
        boolean spin = settings.spinMicros() > 0 && Cores.tryEnterHostSpin();
        // A stub we had to wake answers a wake-up later: a spin as short as usual would end before that and
        // put this thread to sleep too, so the stub would have to wake it, and each side's late wake-up
        // would make the other fall asleep again, request after request.
        long spinEnd = spin ? System.nanoTime() + settings.spinMicros() * 1000 * (wokeStub ? AFTER_WAKE_SPIN_FACTOR : 1) : 0;
        boolean futex = ctl.get(ValueLayout.JAVA_LONG, Wire.W_HOST_FUTEX) == 1L && ctl.get(ValueLayout.JAVA_LONG, Wire.W_STUB_FUTEX) == 1L;
        boolean waiting = false;
        try {
            while (true) {
                long reply = (long) LONG.getVolatile(ctl, Wire.W_REPLY_SEQ);
                if (reply == e.seq) {
                    return true;
                }
                if (e.abandoned || dead.get()) {
                    return false;
                }
                if (Thread.currentThread().isInterrupted()) {
                    // The host gave up on this execute (its watchdog, unload): abandon it like a stall.
                    abandon.accept("had execute() interrupted by the host");
                    return false;
                }
                if (!waiting) {
                    if (spin && System.nanoTime() < spinEnd) {
                        Thread.onSpinWait();
                    } else {
                        if (spin) {
                            spin = false;
                            Cores.exitHostSpin();
                        }
                        LONG.setVolatile(ctl, Wire.W_HOST_WAITING, futex ? Wire.WAITING_FUTEX : 1L);
                        waiting = true;
                    }
                    continue;
                }
                if (futex) {
                    // Bounded so that a dead stub, an abandoned execution or an interrupt is seen.
                    Futex.await(ctl.asSlice(Wire.W_REPLY_SEQ, 4), (int) reply, futexTimeout);
                } else {
                    LockSupport.parkNanos(1_000_000);
                }
            }
        } finally {
            if (spin) {
                Cores.exitHostSpin();
            }
            if (waiting) {
                LONG.setVolatile(ctl, Wire.W_HOST_WAITING, 0L);
            }
        }
    }
}
