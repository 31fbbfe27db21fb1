package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Await;
import io.backplane.testkit.Reply;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The hand-off between host and stub when nobody spins: every execution wakes a sleeping stub and
 * every result a sleeping host, through the control block's futexes and through the socket's WAKE
 * frames; and the spin gate of {@link Cores}.
 */
class StubWakeupTest {
    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Futex.socketOnly = false;
        Harness.assertClean();
    }

    @ParameterizedTest(name = "socketOnly={0}")
    @ValueSource(booleans = {false, true})
    void roundTrips_spinOff_everyHandOffWakesASleepingSide(boolean socketOnly) throws Exception {
        if (!socketOnly) {
            assumeTrue(Futex.available(), "no futex on this platform");
        }
        Futex.socketOnly = socketOnly;
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.SPIN, "0"), false)) {
            assertEquals(!socketOnly, h.stub().futexWakeups(), "wake-up path of the connection");
            for (int i = 0; i < 200; i++) {
                float[] x = {i, -i, i * 0.5f};
                assertArrayEquals(x, call(h, x), "request " + i);
            }
            // Several callers at random moments: wake-ups race with the stub going to sleep.
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> callers = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                int thread = t;
                callers.add(Thread.ofPlatform().name("wakeup-test-caller-" + t).start(() -> {
                    try {
                        for (int i = 0; i < 60; i++) {
                            if (ThreadLocalRandom.current().nextBoolean()) {
                                Thread.onSpinWait();
                            } else {
                                Thread.yield();
                            }
                            float[] x = {thread, i};
                            assertArrayEquals(x, call(h, x), "caller " + thread + " request " + i);
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            for (Thread c : callers) {
                c.join();
            }
            if (failure.get() != null) {
                throw new AssertionError("a concurrent round trip failed", failure.get());
            }
            assertEquals(1, h.stub().generation(), "the stub was restarted");
            assertWakeupsOnlyToSleepers(h.stub(), 200 + 6 * 60);
            assertMonitorWokenOnlyWhenAsleep(h.instance());
        }
    }

    /**
     * With spinning allowed and one caller in a tight loop, the host still wakes the stub only when
     * it went to sleep: never more wake-ups than sleeps, never more sleeps than executions.
     */
    @Test
    void roundTrips_spinOn_wakeupsOnlyToASleepingStub() throws Exception {
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.SPIN, "200"), false)) {
            for (int i = 0; i < 300; i++) {
                float[] x = {i};
                assertArrayEquals(x, call(h, x), "request " + i);
            }
            assertWakeupsOnlyToSleepers(h.stub(), 300);
            assertMonitorWokenOnlyWhenAsleep(h.instance());
            // Back-to-back executions keep the monitor ticking; it goes idle only when a 10 ms tick
            // falls between two of them, so far fewer wake-ups than executions.
            assertTrue(h.instance().monitorWakeups() < 150,
                    "the monitor was unparked " + h.instance().monitorWakeups() + " times for 300 back-to-back executions");
        }
    }

    /**
     * The monitor that watches executions is unparked only out of a park without a timeout (it had
     * no work); one that ticks already is left to tick. An unpark per execution, as before issue 16,
     * would count 300 here against a handful of idle parks.
     */
    private static void assertMonitorWokenOnlyWhenAsleep(PythonInstance instance) {
        long wakeups = instance.monitorWakeups();
        long parks = instance.monitorIdleParks();
        assertTrue(wakeups <= parks, "the monitor was unparked " + wakeups + " times but set out to park idle only " + parks + " times");
    }

    /**
     * An idle stub and an idle host use no CPU: once the last result is in, the stub's main thread
     * sleeps and nothing wakes it, nor the instance's monitor, over a window of 20 heartbeat round
     * trips (which wake only the stub's socket reader); the main thread's CPU time does not move.
     * The window is counted in round trips, not time. The next request then wakes it exactly once.
     */
    @Test
    void idle_afterRoundTrips_nothingWakesStubOrMonitor() throws Exception {
        try (Harness h = new Harness(Configs.identity(), Map.of(), false)) {
            for (int i = 0; i < 50; i++) {
                float[] x = {i, 1};
                assertArrayEquals(x, call(h, x), "request " + i);
            }
            StubConnection s = h.stub();
            // A thread shows WAITING as it enters park() even when an unpark is pending (it then returns at once and runs a
            // round): the monitor is parked for good only once every unpark it was given has been used by a park.
            Await.until(() -> s.stubSleeping() && h.instance().monitorIdle()
                    && h.instance().monitorParkReturns() >= h.instance().monitorWakeups(), Duration.ofSeconds(10),
                    "the stub's main thread asleep and the monitor parked after the last result, no wake-up pending");
            long wakeups = s.stubWakeups();
            long sleeps = s.stubSleeps();
            long sent = s.stubWakeupsSent();
            long rounds = h.instance().monitorRounds();
            long mainTicks = mainThreadTicks(s.pid());
            for (int i = 0; i < 20; i++) {
                long seq = s.heartbeat();
                Await.until(() -> s.heartbeatAnswered(seq), Duration.ofSeconds(10), "the PONG of heartbeat " + seq);
            }
            assertEquals(wakeups, s.stubWakeups(), "the idle stub's main thread woke up");
            assertEquals(sleeps, s.stubSleeps(), "the idle stub's main thread went to sleep again");
            assertEquals(sent, s.stubWakeupsSent(), "the host woke an idle stub");
            assertEquals(rounds, h.instance().monitorRounds(), "the idle instance's monitor ran");
            assertEquals(mainTicks, mainThreadTicks(s.pid()), "the idle stub's main thread used CPU");
            assertTrue(s.stubSleeping(), "the idle stub's main thread is not asleep");

            float[] x = {7};
            assertArrayEquals(x, call(h, x), "the request after the idle window");
            assertEquals(sent + 1, s.stubWakeupsSent(), "wake-ups the host sent for the request after the idle window");
            assertTrue(s.stubWakeups() > wakeups, "the request after the idle window did not wake the stub");
        }
    }

    private static void assertWakeupsOnlyToSleepers(StubConnection s, int executions) {
        long sent = s.stubWakeupsSent();
        long sleeps = s.stubSleeps();
        assertTrue(sent <= sleeps, "the host sent " + sent + " wake-ups to a stub that slept " + sleeps + " times");
        // A WAKE frame that arrives after the stub found its execution anyway can end one later sleep early.
        assertTrue(sleeps <= executions + 1 + sent, "the stub slept " + sleeps + " times around " + executions + " executions");
    }

    /** utime+stime (ticks) of the stub's main thread, from /proc. */
    private static long mainThreadTicks(long pid) throws Exception {
        String stat = Files.readString(Path.of("/proc/" + pid + "/task/" + pid + "/stat"), StandardCharsets.US_ASCII);
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }

    @Test
    void tryEnterHostSpin_moreBusyStubsThanCores_refusesAtOnce() {
        for (int i = 0; i < Cores.CORES; i++) {
            Cores.executionPosted();
        }
        try {
            assertFalse(Cores.tryEnterHostSpin(), "a host thread spun beside as many busy stubs as there are cores");
        } finally {
            for (int i = 0; i < Cores.CORES; i++) {
                Cores.executionReturned();
            }
        }
    }

    @Test
    void freeCores_jitCompiling_leavesItACore() {
        assertEquals(2, Cores.freeCores(2, 0.0, 0.0), "an idle 2-core machine");
        assertEquals(1, Cores.freeCores(2, 0.6, 0.0), "others' 0.6 of a core rounds to one core");
        assertEquals(2, Cores.freeCores(2, 0.0, Cores.JIT_BUSY / 2), "a JIT compiling now and then takes no core");
        assertEquals(1, Cores.freeCores(2, 0.0, Cores.JIT_BUSY), "a busy JIT takes one core");
        assertEquals(1, Cores.freeCores(2, 0.0, 0.9), "a busy JIT takes one core");
        assertEquals(0, Cores.freeCores(2, 0.0, 1.4), "two compiler threads take two cores");
        assertEquals(0, Cores.freeCores(2, 1.0, 0.5), "others and the JIT together take both cores");
        assertEquals(0, Cores.freeCores(2, 3.0, 3.0), "never below zero");
        assertEquals(4, Cores.freeCores(4, -1.0, 0.0), "never above the cores");
    }

    @Test
    void stubMaySpin_moreStubsThanCores_false() {
        List<Long> fake = new ArrayList<>();
        for (int i = 0; i < Cores.CORES; i++) {
            fake.add(Long.MAX_VALUE - i); // no such processes: their CPU time reads as 0
        }
        fake.forEach(Cores::stubStarted);
        try {
            assertFalse(Cores.stubMaySpin(), "stubs may spin with as many stubs as cores (each with its host waiter)");
            long shortSpin = Cores.stubSpinNanos(200_000);
            assertTrue(shortSpin == 0 || shortSpin == Cores.SHORT_SPIN_NANOS && Cores.freeCores() >= Cores.CORES,
                    "as many stubs as cores spin " + shortSpin + " ns with " + Cores.freeCores() + " cores free");
            Cores.stubStarted(Long.MAX_VALUE - Cores.CORES);
            try {
                assertEquals(0, Cores.stubSpinNanos(200_000), "more stubs than cores still spin");
            } finally {
                Cores.stubEnded(Long.MAX_VALUE - Cores.CORES);
            }
        } finally {
            fake.forEach(Cores::stubEnded);
        }
        assertTrue(Cores.freeCores() >= 0 && Cores.freeCores() <= Cores.CORES, "free cores out of range: " + Cores.freeCores());
    }

    private static float[] call(Harness h, float[] x) throws InterruptedException {
        Reply r = h.send(InferenceRequest.builder("identity").input(Tensor.ofFloats("INPUT0", new long[] {x.length}, x)).build());
        return r.awaitSuccess().output("OUTPUT0").toFloatArray();
    }
}
