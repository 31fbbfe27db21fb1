package io.backplane.backend.python;

import java.io.BufferedReader;
import java.io.IOException;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Which spins the machine can afford, JVM-wide, for every stub connection: spinning is decided by
 * measured core availability, never by a fixed setting.
 *
 * <p>Every {@value #SAMPLE_MS} ms at most (lazily, by whichever thread asks), it reads the
 * machine's busy time ({@code /proc/stat}) and subtracts what this JVM and its live stubs used
 * ({@code /proc/self/stat}, {@code /proc/<pid>/stat}): what is left is the other processes'
 * load, so our own spinning never closes the gate on itself (a load average does). That load is
 * smoothed over about a second and rounded to whole cores; the cores the others leave free, less
 * those this JVM's JIT compiler is busy on ({@link #freeCores(int, double, double)}), are the spin
 * slots. Then:
 * <ul>
 *   <li>a host thread waiting for a stub's result spins only while
 *       {@code busy stubs + spinning host threads} stays within the free cores
 *       ({@link #tryEnterHostSpin}); with more busy stubs than free cores, it blocks at once;</li>
 *   <li>a stub spins for the next execution while every live stub and its host waiter would fit
 *       on the free cores ({@link #stubMaySpin}); while only the stubs fit, it spins
 *       {@value #SHORT_SPIN_NANOS} ns at most, enough for a busy instance's next execution; with
 *       more instances than free cores, a stub blocks at once ({@link #stubSpinNanos}).</li>
 * </ul>
 * Where {@code /proc} cannot be read, the machine counts as fully free. Thread-safe.
 */
final class Cores {
    static final int CORES = Runtime.getRuntime().availableProcessors();
    private static final int SAMPLE_MS = 250;
    private static final double TICK_NANOS = 1e9 / 100; // USER_HZ is 100 on every Linux ABI we run on
    private static final Set<Long> STUB_PIDS = ConcurrentHashMap.newKeySet();
    private static final Map<Long, Long> LAST_STUB_TICKS = new HashMap<>(); // guarded by the NEXT compare-and-set
    private static final AtomicInteger HOST_SPINNERS = new AtomicInteger();
    private static final AtomicInteger BUSY_STUBS = new AtomicInteger();
    private static final AtomicLong NEXT = new AtomicLong(System.nanoTime());
    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private static volatile int freeCores = CORES;
    private static double othersLoad = -1; // smoothed load of the other processes, in cores (guarded by NEXT)
    // last sample (guarded by the NEXT compare-and-set)
    private static long lastNanos = System.nanoTime();
    private static long lastBusyTicks = -1;
    private static long lastJvmNanos;
    private static long lastJitMillis = -1;
    private static final @Nullable CompilationMXBean JIT = ManagementFactory.getCompilationMXBean();
    /** The JIT's share of a core (compile time per wall time) from which it counts as taking a core ({@link #freeCores(int, double, double)}). */
    static final double JIT_BUSY = 0.05;

    private Cores() {
    }

    static void stubStarted(long pid) {
        if (pid > 0) {
            STUB_PIDS.add(pid);
        }
    }

    static void stubEnded(long pid) {
        STUB_PIDS.remove(pid);
    }

    static void executionPosted() {
        BUSY_STUBS.incrementAndGet();
    }

    static void executionReturned() {
        BUSY_STUBS.decrementAndGet();
    }

    /** A host thread may spin for a result: call {@link #exitHostSpin} after, when true. */
    static boolean tryEnterHostSpin() {
        int free = freeCores();
        int n = HOST_SPINNERS.incrementAndGet();
        if (n + BUSY_STUBS.get() > free) {
            HOST_SPINNERS.decrementAndGet();
            return false;
        }
        return true;
    }

    static void exitHostSpin() {
        HOST_SPINNERS.decrementAndGet();
    }

    /** Whether stubs may spin for their next execution now (each with its host waiter). */
    static boolean stubMaySpin() {
        return 2 * STUB_PIDS.size() <= freeCores();
    }

    /** The longest spin a stub makes for its next execution when it may not spin in full ({@link #stubSpinNanos}). */
    static final long SHORT_SPIN_NANOS = 40_000;

    /**
     * How long a stub may spin for its next execution, at most {@code full}: all of it while every
     * stub and its host waiter fit on the free cores; {@value #SHORT_SPIN_NANOS} ns while the stubs
     * alone fit (one spinner per free core: the host thread of a busy instance posts the next
     * execution within that, and a futex wake-up costs the stub more on a busy machine); none with
     * more stubs than free cores.
     */
    static long stubSpinNanos(long full) {
        int free = freeCores();
        int stubs = STUB_PIDS.size();
        if (2 * stubs <= free) {
            return full;
        }
        return CORES >= 2 && stubs <= free ? Math.min(full, SHORT_SPIN_NANOS) : 0;
    }

    /** The cores the other processes leave free (sampled at most every {@value #SAMPLE_MS} ms). */
    static int freeCores() {
        long now = System.nanoTime();
        long n = NEXT.get();
        if (now - n >= 0 && NEXT.compareAndSet(n, now + TimeUnit.MILLISECONDS.toNanos(SAMPLE_MS))) {
            sample(now);
        }
        return freeCores;
    }

    private static void sample(long now) {
        long busy = machineBusyTicks();
        if (busy < 0) {
            freeCores = CORES;
            return;
        }
        long jvm = Math.max(0, OS.getProcessCpuTime());
        double oursNanos = jvm - lastJvmNanos;
        // Only stubs seen at both samples count: one that started or ended in between is left out.
        Map<Long, Long> ticks = new HashMap<>();
        for (Long pid : STUB_PIDS) {
            long t = processTicks(pid);
            ticks.put(pid, t);
            Long before = LAST_STUB_TICKS.get(pid);
            if (before != null && t >= before) {
                oursNanos += (t - before) * TICK_NANOS;
            }
        }
        long jitMillis = jitMillis();
        if (lastBusyTicks >= 0 && now > lastNanos) {
            double sampled = Math.max(0, ((busy - lastBusyTicks) * TICK_NANOS - oursNanos) / (now - lastNanos));
            // Smoothed over about a second, and rounded: the sample's tick granularity (10 ms per process
            // per 250 ms) and a short burst of someone else's work must not switch spinning off and on.
            double others = othersLoad < 0 ? sampled : 0.5 * othersLoad + 0.5 * sampled;
            othersLoad = others;
            double jit = lastJitMillis >= 0 && jitMillis >= lastJitMillis ? (jitMillis - lastJitMillis) * 1e6 / (now - lastNanos) : 0;
            freeCores = freeCores(CORES, others, jit);
        }
        lastJitMillis = jitMillis;
        lastNanos = now;
        lastBusyTicks = busy;
        lastJvmNanos = jvm;
        LAST_STUB_TICKS.clear();
        LAST_STUB_TICKS.putAll(ticks);
    }

    /**
     * The spin slots: the cores the other processes leave ({@code others}, in cores), less the
     * cores this JVM's JIT compiler is using ({@code jit}, compile time per wall time), not
     * smoothed. In the first seconds after a start the compiler threads compile the request path;
     * host threads and stubs spinning on every core would take the cores from them, and each
     * compilation would then preempt a spinner for a scheduler slice (a millisecond or more, the
     * cold p99 on a 2-core machine). While it compiles, the waits block instead and leave it a
     * core. Our own spinning and stubs are in neither figure.
     */
    static int freeCores(int cores, double others, double jit) {
        long free = Math.round(cores - others);
        if (jit >= JIT_BUSY) {
            free -= (long) Math.ceil(Math.min(jit, cores));
        }
        return (int) Math.max(0, Math.min(cores, free));
    }

    /** The JIT's accumulated compile time, ms, or -1 where the JVM does not say. */
    private static long jitMillis() {
        try {
            return JIT != null && JIT.isCompilationTimeMonitoringSupported() ? JIT.getTotalCompilationTime() : -1;
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /**
     * user+nice+system+irq+softirq ticks of all cores, or -1 where /proc/stat is unreadable. Steal
     * (time the hypervisor gave our virtual cores to someone else) is left out: it is not work on
     * this machine that a spin would take a core from, and it grows with our own spinning.
     */
    private static long machineBusyTicks() {
        try (BufferedReader r = Files.newBufferedReader(Path.of("/proc/stat"), StandardCharsets.US_ASCII)) {
            String line = r.readLine();
            if (line == null || !line.startsWith("cpu ")) {
                return -1;
            }
            String[] f = line.trim().split("\\s+");
            long busy = 0;
            for (int i = 1; i < f.length && i <= 7; i++) {
                if (i != 4 && i != 5) { // idle, iowait
                    busy += Long.parseLong(f[i]);
                }
            }
            return busy;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** utime+stime ticks of a process, 0 when it is gone. */
    private static long processTicks(long pid) {
        try {
            String s = Files.readString(Path.of("/proc/" + pid + "/stat"), StandardCharsets.US_ASCII);
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(f[11]) + Long.parseLong(f[12]); // fields 14 and 15
        } catch (IOException | RuntimeException e) {
            return 0;
        }
    }
}
