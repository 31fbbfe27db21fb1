package io.backplane.core.internal;

import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.IntSupplier;

/**
 * A bounded, adaptive spin before a thread parks, for the two hand-offs of a request: an instance
 * worker waiting for the next request, and a caller waiting for its response. A park and unpark
 * costs a thread wake-up (tens of microseconds on a small VM); a spin that sees the hand-off costs
 * a cache-line transfer.
 *
 * <p>It never replaces the park, only delays it, and is bounded three ways so that an idle host
 * and a loaded machine lose nothing:
 * <ol>
 *   <li>only when a core is free: none on one core, and never more threads of this JVM at once
 *       than the cores the other processes leave free, measured at most every 250 ms from the
 *       machine's busy time ({@code /proc/stat}, without the hypervisor's steal) less this JVM's
 *       own CPU time, smoothed over about a second and rounded to whole cores, so that the spins
 *       themselves never count as load (a load average does count them, and would switch spinning
 *       off because of it); where {@code /proc/stat} cannot be read, the load average stands in;</li>
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
    private static final LoadGate MACHINE = new LoadGate();

    private final long ceilingNanos;
    private final BooleanSupplier coreFree;
    private final IntSupplier freeCores;
    private volatile long budgetNanos;

    /** A spin site whose spins last at most {@code ceiling}, when the machine has a core free. */
    public Spin(long ceiling, TimeUnit unit) {
        this(ceiling, unit, MACHINE, MACHINE::freeCores);
    }

    Spin(long ceiling, TimeUnit unit, BooleanSupplier coreFree) {
        this(ceiling, unit, coreFree, () -> CORES);
    }

    private Spin(long ceiling, TimeUnit unit, BooleanSupplier coreFree, IntSupplier freeCores) {
        this.ceilingNanos = Math.max(FLOOR_NANOS, unit.toNanos(ceiling));
        this.budgetNanos = ceilingNanos;
        this.coreFree = coreFree;
        this.freeCores = freeCores;
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
        if (SPINNING.incrementAndGet() > Math.min(CORES, freeCores.getAsInt())) {
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

    /**
     * How many cores the other processes leave free, sampled at most every 250 ms: the machine's
     * busy time less this JVM's CPU time, over the interval; the one-minute load average where
     * {@code /proc/stat} cannot be read.
     */
    private static final class LoadGate implements BooleanSupplier {
        private static final long EVERY_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
        private static final double TICK_NANOS = 1e9 / 100; // USER_HZ
        private final OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        private final AtomicLong next = new AtomicLong(System.nanoTime());
        private volatile int free = CORES;
        // the last sample, guarded by the compare-and-set on next
        private long lastNanos;
        private long lastBusyTicks = -1;
        private long lastOwnNanos;
        private double othersLoad = -1;

        @Override
        public boolean getAsBoolean() {
            return freeCores() > 0;
        }

        int freeCores() {
            long now = System.nanoTime();
            long n = next.get();
            if (now - n >= 0 && next.compareAndSet(n, now + EVERY_NANOS)) {
                sample(now);
            }
            return free;
        }

        private void sample(long now) {
            long busy = busyTicks();
            long own = os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() : -1;
            if (busy < 0 || own < 0) {
                double load = os.getSystemLoadAverage(); // negative where the platform cannot tell
                free = load < 0 ? CORES : (int) Math.max(0, Math.floor(CORES - load));
                return;
            }
            if (lastBusyTicks >= 0 && now > lastNanos) {
                double sampled = Math.max(0, ((busy - lastBusyTicks) * TICK_NANOS - (own - lastOwnNanos)) / (now - lastNanos));
                // smoothed over about a second and rounded, so that tick granularity and short bursts do not flap it
                double others = othersLoad < 0 ? sampled : 0.5 * othersLoad + 0.5 * sampled;
                othersLoad = others;
                free = (int) Math.max(0, Math.min(CORES, Math.round(CORES - others)));
            }
            lastNanos = now;
            lastBusyTicks = busy;
            lastOwnNanos = own;
        }

        /**
         * Busy ticks of all cores (user, nice, system, irq, softirq: not idle, iowait nor the
         * hypervisor's steal), or -1 where /proc/stat is unreadable.
         */
        private static long busyTicks() {
            try (java.io.BufferedReader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of("/proc/stat"),
                    java.nio.charset.StandardCharsets.US_ASCII)) {
                String line = r.readLine();
                if (line == null || !line.startsWith("cpu ")) {
                    return -1;
                }
                String[] f = line.trim().split("\\s+");
                long busy = 0;
                for (int i = 1; i < f.length && i <= 7; i++) {
                    if (i != 4 && i != 5) {
                        busy += Long.parseLong(f[i]);
                    }
                }
                return busy;
            } catch (java.io.IOException | RuntimeException e) {
                return -1;
            }
        }
    }
}
