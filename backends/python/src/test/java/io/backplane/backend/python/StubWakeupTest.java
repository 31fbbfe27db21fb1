package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Reply;
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
        }
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
    void stubMaySpin_moreStubsThanCores_false() {
        List<Long> fake = new ArrayList<>();
        for (int i = 0; i < Cores.CORES; i++) {
            fake.add(Long.MAX_VALUE - i); // no such processes: their CPU time reads as 0
        }
        fake.forEach(Cores::stubStarted);
        try {
            assertFalse(Cores.stubMaySpin(), "stubs may spin with as many stubs as cores (each with its host waiter)");
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
