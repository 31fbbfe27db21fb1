package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The spin before a park: bounded, adaptive, never a replacement for the park (issue 16). */
class SpinTest {
    private static final long CEILING = TimeUnit.MICROSECONDS.toNanos(64);

    @Test
    void await_alreadyDone_returnsTrueWithoutSpinning() {
        Spin spin = new Spin(64, TimeUnit.MICROSECONDS, () -> true);
        AtomicInteger calls = new AtomicInteger();
        assertTrue(spin.await(() -> calls.incrementAndGet() > 0));
        assertEquals(1, calls.get());
    }

    @Test
    void await_noCoreFree_returnsAtOnceAndKeepsTheBudget() {
        Spin spin = new Spin(64, TimeUnit.MICROSECONDS, () -> false);
        AtomicInteger calls = new AtomicInteger();
        assertFalse(spin.await(() -> calls.incrementAndGet() > 1));
        assertEquals(1, calls.get(), "looked once, did not spin");
        assertEquals(CEILING, spin.budgetNanos());
    }

    @Test
    void await_neverDone_returnsFalseAndHalvesTheBudget() {
        assumeTrue(Runtime.getRuntime().availableProcessors() > 1, "a single core never spins");
        Spin spin = new Spin(64, TimeUnit.MICROSECONDS, () -> true);
        assertFalse(spin.await(() -> false));
        assertEquals(CEILING / 2, spin.budgetNanos());
        for (int i = 0; i < 20; i++) {
            assertFalse(spin.await(() -> false));
        }
        assertEquals(TimeUnit.MICROSECONDS.toNanos(1), spin.budgetNanos(), "the budget settles at the floor, never at zero");
    }

    @Test
    void await_handOffSeen_returnsTrueAndTheBudgetGrowsBackToTheCeiling() {
        assumeTrue(Runtime.getRuntime().availableProcessors() > 1, "a single core never spins");
        Spin spin = new Spin(64, TimeUnit.MICROSECONDS, () -> true);
        for (int i = 0; i < 3; i++) {
            assertFalse(spin.await(() -> false));
        }
        assertEquals(CEILING / 8, spin.budgetNanos());
        AtomicInteger calls = new AtomicInteger();
        assertTrue(spin.await(() -> calls.incrementAndGet() >= 3), "done on the third look");
        assertEquals(CEILING / 4, spin.budgetNanos());
        for (int i = 0; i < 10; i++) {
            AtomicInteger c = new AtomicInteger();
            assertTrue(spin.await(() -> c.incrementAndGet() >= 2));
        }
        assertEquals(CEILING, spin.budgetNanos(), "capped at the ceiling");
    }
}
