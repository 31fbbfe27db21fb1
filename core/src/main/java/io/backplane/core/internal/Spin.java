package io.backplane.core.internal;

import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

/**
 * A bounded, adaptive spin before a thread parks, for the two hand-offs of a request: an instance
 * worker waiting for the next request, and a caller waiting for its response. A park and unpark
 * costs a thread wake-up (tens of microseconds on a small VM); a spin that sees the hand-off costs
 * a cache-line transfer.
 *
 * <p>It never replaces the park, only delays it, and is bounded three ways so that an idle host
 * and a loaded machine lose nothing:
 * <ol>
 *   <li>only when a core is free: none on one core, none while the machine's load average is at
 *       or above its core count (checked at most once a second), and never more threads of this
 *       JVM at once than there are cores;</li>
 *   <li>one spin lasts at most its site's budget;</li>
 *   <li>the budget adapts per site: it doubles after a spin that saw its hand-off and halves after
 *       one that did not, between a floor and a ceiling. A site whose hand-offs take longer than
 *       the ceiling (a slow model, a deep queue) settles at the floor and parks almost at once.</li>
 * </ol>
 * Thread-safe; the budget is a heuristic, so racing updates of it are allowed to lose.
 */
public final class Spin {
    private static final int CORES = Runtime.getRuntime().availableProcessors();
    private static final AtomicInteger SPINNING = new AtomicInteger();
    private static final long FLOOR_NANOS = TimeUnit.MICROSECONDS.toNanos(1);
    private static final BooleanSupplier MACHINE = new LoadGate();

    private final long ceilingNanos;
    private final BooleanSupplier coreFree;
    private volatile long budgetNanos;

    /** A spin site whose spins last at most {@code ceiling}, when the machine has a core free. */
    public Spin(long ceiling, TimeUnit unit) {
        this(ceiling, unit, MACHINE);
    }

    Spin(long ceiling, TimeUnit unit, BooleanSupplier coreFree) {
        this.ceilingNanos = Math.max(FLOOR_NANOS, unit.toNanos(ceiling));
        this.budgetNanos = ceilingNanos;
        this.coreFree = coreFree;
    }

    /**
     * Spins until {@code done} is true or the budget runs out.
     *
     * @return {@code done}'s last value: when false, the caller parks as it would have without spinning
     */
    public boolean await(BooleanSupplier done) {
        if (done.getAsBoolean()) {
            return true;
        }
        if (CORES < 2 || !coreFree.getAsBoolean()) {
            return false;
        }
        if (SPINNING.incrementAndGet() > CORES) {
            SPINNING.decrementAndGet();
            return false;
        }
        try {
            long budget = budgetNanos;
            long start = System.nanoTime();
            int i = 0;
            while (true) {
                Thread.onSpinWait();
                if (done.getAsBoolean()) {
                    budgetNanos = Math.min(ceilingNanos, budget << 1);
                    return true;
                }
                if ((++i & 31) == 0 && System.nanoTime() - start > budget) {
                    budgetNanos = Math.max(FLOOR_NANOS, budget >> 1);
                    return false;
                }
            }
        } finally {
            SPINNING.decrementAndGet();
        }
    }

    /** The current budget of one spin (tests, diagnostics). */
    long budgetNanos() {
        return budgetNanos;
    }

    /** Whether the load average (one minute, read at most once a second) leaves a core free. */
    private static final class LoadGate implements BooleanSupplier {
        private static final long EVERY_NANOS = TimeUnit.SECONDS.toNanos(1);
        private final OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        private final AtomicLong next = new AtomicLong(System.nanoTime());
        private volatile boolean free = true;

        @Override
        public boolean getAsBoolean() {
            long now = System.nanoTime();
            long n = next.get();
            if (now - n >= 0 && next.compareAndSet(n, now + EVERY_NANOS)) {
                double load = os.getSystemLoadAverage(); // negative where the platform cannot tell
                free = load < CORES;
            }
            return free;
        }
    }
}
