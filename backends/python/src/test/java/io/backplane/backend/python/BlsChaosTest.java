package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * C1 with BLS in the picture, randomized: parents calling a slow child are cancelled, their model
 * is unloaded and reloaded, and stubs (callers' and callees') are killed while children run.
 * Every request ends exactly once with its own payload or an error, and afterwards nothing is
 * open: no request, no held version, no stub, no shared-memory file of this JVM.
 */
class BlsChaosTest {
    private static final int ROUNDS = 6;
    private static final int PER_ROUND = 8;

    @TempDir
    Path temp;

    @BeforeAll
    static void python() throws Exception {
        BlsRepository.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        BlsRepository.assertClean();
    }

    @Test
    void blsCallers_cancelledUnloadedAndKilled_everythingEndsOnceAndNothingIsLeft() throws Exception {
        long seed = System.nanoTime();
        Random rnd = new Random(seed);
        Map<ErrorCode, Integer> errors = new EnumMap<>(ErrorCode.class);
        int ok = 0;
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(BlsRepository.write(temp, 2)).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("slow_echo").loadModel("bls_waiter").unloadTimeout(Duration.ofMillis(300)).restartBackoff(Duration.ofMillis(20),
                        Duration.ofMillis(200)).build()) {
            for (int round = 0; round < ROUNDS; round++) {
                if (!host.isModelReady("bls_waiter")) {
                    host.load("bls_waiter");
                }
                List<CompletableFuture<InferenceResponse>> calls = new ArrayList<>();
                List<Float> payloads = new ArrayList<>();
                for (int i = 0; i < PER_ROUND; i++) {
                    float ms = 1 + rnd.nextInt(300) + i * 0.01f; // the fraction names the caller: a routing check
                    payloads.add(ms);
                    calls.add(host.infer(InferenceRequest.builder("bls_waiter").input(Tensor.ofFloats("X", new long[] {1}, ms))
                            .input(Tensor.ofStrings("TARGET", new long[] {1}, "slow_echo")).build()));
                }
                switch (round % 3) {
                    case 0 -> calls.get(rnd.nextInt(calls.size())).cancel(true);
                    case 1 -> killOneStub(rnd);
                    default -> host.unload("bls_waiter");
                }
                if (rnd.nextBoolean()) {
                    calls.get(rnd.nextInt(calls.size())).cancel(true);
                }
                for (int i = 0; i < calls.size(); i++) {
                    try {
                        InferenceResponse r = calls.get(i).get(120, TimeUnit.SECONDS);
                        assertEquals(payloads.get(i), r.output("Y").toFloatArray()[0], "request " + i + " of round " + round + " (seed " + seed + ")");
                        ok++;
                    } catch (java.util.concurrent.CancellationException e) {
                        errors.merge(ErrorCode.CANCELLED, 1, Integer::sum);
                    } catch (ExecutionException e) {
                        errors.merge(((BackplaneException) e.getCause()).code(), 1, Integer::sum);
                    }
                }
                BlsHostTest.awaitOpen(host, 0);
            }
            assertEquals(ROUNDS * PER_ROUND, ok + errors.values().stream().mapToInt(Integer::intValue).sum());
            assertTrue(ok > 0, "some requests succeeded (seed " + seed + ", errors " + errors + ")");
            assertEquals(0, host.openRequests());
            host.load("bls_waiter");
            assertEquals(7f, host.infer(InferenceRequest.builder("bls_waiter").input(Tensor.ofFloats("X", new long[] {1}, 7))
                    .input(Tensor.ofStrings("TARGET", new long[] {1}, "slow_echo")).build()).get(60, TimeUnit.SECONDS).output("Y").toFloatArray()[0]);
        }
    }

    private static void killOneStub(Random rnd) {
        List<ProcessHandle> stubs = Harness.liveStubs(); // forks of a template are not the JVM's children
        if (!stubs.isEmpty()) {
            stubs.get(rnd.nextInt(stubs.size())).destroyForcibly();
        }
    }
}
