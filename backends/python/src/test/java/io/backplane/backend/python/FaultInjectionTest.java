package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Reply;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Stops, resumes and kills stubs at random points while batches execute. Every request carries
 * a unique payload tag; each must end exactly once, and a successful response must carry its
 * own tag: no response ever reaches another request, whatever the stub does late.
 */
class FaultInjectionTest {
    private static final Logger log = LoggerFactory.getLogger(FaultInjectionTest.class);
    private static final int TRIALS = 200;

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    private enum Fault { NONE, STOP_RESUME, KILL, STOP_FOREVER }

    @Test
    @Timeout(value = 600, unit = TimeUnit.SECONDS) // restarts import numpy: slow on a loaded machine
    void randomStopResumeKill_200Trials_everyRequestEndsOnceWithItsOwnPayload() throws Exception {
        long seed = Long.getLong("faults.seed", System.nanoTime());
        log.info("fault injection seed {}", seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        int ok = 0;
        int failed = 0;
        int[] faults = new int[Fault.values().length];
        try (Harness h = new Harness(Configs.batched(Configs.identity()), Map.of(StubSettings.HEARTBEAT_TIMEOUT, "250", StubSettings.STALL_KILL, "400",
                StubSettings.HEARTBEAT_INTERVAL, "25", StubSettings.RESTART_BACKOFF_MAX, "100"))) {
            for (int trial = 0; trial < TRIALS; trial++) {
                h.awaitReady(60_000);
                int n = 1 + rnd.nextInt(3);
                List<InferenceRequest> reqs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    float tag = trial * 10 + i + 0.5f;
                    int sleep = i == 0 ? rnd.nextInt(40) : 0;
                    InferenceRequest r = InferenceRequest.builder("identity").id("t" + trial + "." + i).parameter("sleep_ms", (long) sleep)
                            .input(Tensor.ofFloats("INPUT0", new long[] {1, 3}, tag, trial, i)).build();
                    reqs.add(r);
                }
                int p = rnd.nextInt(100);
                Fault fault = p < 57 ? Fault.NONE : p < 92 ? Fault.STOP_RESUME : p < 97 ? Fault.KILL : Fault.STOP_FOREVER;
                faults[fault.ordinal()]++;
                long pid = h.stub().pid();
                int delay = rnd.nextInt(30);
                int resumeAfter = rnd.nextInt(500);
                Thread injector = Thread.ofPlatform().start(() -> inject(fault, pid, delay, resumeAfter));
                try {
                    for (Reply r : h.run(reqs.toArray(InferenceRequest[]::new))) {
                        InferenceResponse resp = r.await();
                        assertEquals(1, r.terminals(), r.request().id() + " ended more than once");
                        assertTrue(r.responses().size() <= 1, "a plain request got several responses");
                        if (resp.isError()) {
                            failed++;
                            assertEquals(ErrorCode.UNAVAILABLE, resp.error().code(), resp.error().getMessage());
                            assertTrue(resp.error().getMessage().contains("identity_0"), resp.error().getMessage());
                        } else {
                            ok++;
                            float[] in = r.request().input("INPUT0").toFloatArray();
                            assertArrayEquals(in, resp.output("OUTPUT0").toFloatArray(), "request " + r.request().id() + " got another payload");
                        }
                    }
                } finally {
                    injector.join();
                }
            }
            log.info("fault injection: {} trials, {} ok, {} failed, faults {}", TRIALS, ok, failed, java.util.Arrays.toString(faults));
            assertTrue(ok > 0);
            // The last trial may have killed or stopped an idle stub: readiness cannot see that until a
            // request finds it (an idle stub is not pinged), so that request fails UNAVAILABLE and the
            // stub is replaced. The instance must serve again within the deadline.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            InferenceResponse last;
            do {
                h.awaitReady(60_000);
                last = h.run(InferenceRequest.builder("identity").input(Tensor.ofFloats("INPUT0", new long[] {1, 2}, 7, -7)).build()).get(0).await();
                if (last.isError()) {
                    assertEquals(ErrorCode.UNAVAILABLE, last.error().code(), last.error().getMessage());
                }
            } while (last.isError() && System.nanoTime() < deadline);
            InferenceResponse served = last;
            assertFalse(served.isError(), () -> "the instance did not serve again: " + served.error().getMessage());
            assertArrayEquals(new float[] {7, -7}, served.output("OUTPUT0").toFloatArray());
        }
    }

    /** Injects the fault after a random delay (jitter that spreads faults over the execution, not a synchronisation). */
    private static void inject(Fault fault, long pid, int delayMs, int resumeAfterMs) {
        try {
            Thread.sleep(delayMs);
            switch (fault) {
                case NONE -> { }
                case KILL -> ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
                case STOP_FOREVER -> Harness.signal(pid, "STOP");
                case STOP_RESUME -> {
                    Harness.signal(pid, "STOP");
                    Thread.sleep(resumeAfterMs);
                    Harness.signal(pid, "CONT");
                }
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
