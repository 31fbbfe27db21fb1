package io.backplane.testkit;

import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Waits for a condition that has no event to wait on (a backend's readiness, a child process's
 * exit seen through {@code /proc}), up to a deadline. The wait backs off from 1 ms to 50 ms between
 * checks; it is a deadline, never a duration the test relies on: prefer a handshake (a latch, a
 * {@link Reply}, an {@link ExecuteDoor}) where the code under test offers one.
 */
public final class Await {
    private Await() {
    }

    /**
     * Returns once {@code condition} holds.
     *
     * @throws AssertionError "waited N ms for WHAT" when the deadline passes first
     */
    public static void until(BooleanSupplier condition, Duration deadline, String what) {
        long end = System.nanoTime() + deadline.toNanos();
        long pause = 1_000_000;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - end >= 0) {
                throw new AssertionError("waited " + deadline.toMillis() + " ms in vain for " + what);
            }
            LockSupport.parkNanos(pause);
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for " + what);
            }
            pause = Math.min(pause * 2, 50_000_000);
        }
    }
}
