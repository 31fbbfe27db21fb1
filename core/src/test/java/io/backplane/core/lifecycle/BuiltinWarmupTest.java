package io.backplane.core.lifecycle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.ModelStatistics;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The built-in warm-up (a model without {@code model_warmup}: zeros shaped from its config) and
 * the rule for every warm-up: it runs through the version's instances before the load returns, and
 * nothing of it reaches statistics, the host's listeners (what the metrics plugin counts) or the
 * response cache. R1: no model receives it unless its backend declares its execute free of side
 * effects or its own config asks for it; it never holds ready past its budget.
 */
@Timeout(60)
class BuiltinWarmupTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();
    private final List<ScheduledRequest> seen = new CopyOnWriteArrayList<>();
    /** Every listener event, as the metrics plugin would see it. */
    private final List<String> events = new CopyOnWriteArrayList<>();
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private void model(String name, String config) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name));
        Files.writeString(dir.resolve("config.pbtxt"), "name: \"" + name + "\"\nbackend: \"scripted\"\n" + config);
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve("weights"), "v1");
    }

    private BackplaneHost start(boolean builtinWarmup) {
        return start(builtinWarmup, true);
    }

    private BackplaneHost start(boolean builtinWarmup, boolean sideEffectFree) {
        backend.sideEffectFree = sideEffectFree;
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .builtinWarmup(builtinWarmup).responseCache(1 << 20).listener(new Recorder()).build();
        return host;
    }

    /** Echoes the first input as OUT and records what it executes. */
    private void echo(String model) {
        backend.on(model, (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                seen.add(r);
                r.sender().sendFinal(InferenceResponse.of(List.of(r.request().inputs().getFirst().withName("OUT"))));
            }
        });
    }

    private final class Recorder implements HostListener {
        @Override
        public void requestAccepted(String model, long version) {
            events.add("accepted " + model);
        }

        @Override
        public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
            events.add("ended " + model + " " + outcome);
        }

        @Override
        public void requestRejected(String model, Outcome outcome) {
            events.add("rejected " + model);
        }

        @Override
        public void batchExecuted(String model, long version, int requests, int batchSize) {
            events.add("batch " + model + " " + requests);
        }

        @Override
        public void cacheLookup(String model, long version, boolean hit, long lookupNanos) {
            events.add("cache " + model + (hit ? " hit" : " miss"));
        }

        @Override
        public void cacheInserted(String model, long version, long insertNanos) {
            events.add("cached " + model);
        }
    }

    private static long inferences(BackplaneHost h, String model) {
        List<ModelStatistics> s = h.statistics(model, 1);
        return s.isEmpty() ? 0 : s.getFirst().inferenceCount() + s.getFirst().success().count() + s.getFirst().fail().count()
                + s.getFirst().executionCount() + s.getFirst().cacheMiss().count() + s.getFirst().cacheHit().count();
    }

    @Test
    void builtin_zerosShapedFromTheConfig_runBeforeLoadReturns_andReachNoStatisticsListenerOrCache() throws Exception {
        model("w", """
                max_batch_size: 4
                input [ { name: "A" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "B" data_type: TYPE_INT32 dims: [ -1, 2 ] },
                        { name: "S" data_type: TYPE_STRING dims: [ 2 ] }, { name: "O" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
                response_cache { enable: true }
                """);
        echo("w");
        BackplaneHost h = start(true);

        h.load("w");

        assertEquals(4, seen.size(), "the built-in sample ran its count before load returned");
        for (ScheduledRequest r : seen) {
            assertEquals("warmup-builtin", r.request().id());
            assertArrayEquals(new long[] {1, 3}, r.request().input("A").shape(), "batch dimension 1");
            assertArrayEquals(new float[3], r.request().input("A").toFloatArray());
            assertArrayEquals(new long[] {1, 1, 2}, r.request().input("B").shape(), "-1 becomes 1");
            assertEquals(List.of("", ""), r.request().input("S").toStringList(), "BYTES elements are empty strings");
            assertEquals(3, r.request().inputs().size(), "the optional input is left out");
        }
        assertEquals(0, inferences(h, "w"), "statistics after load: " + h.statistics("w", 1));
        assertEquals(List.of(), events, "no listener (metrics) event from the warm-up");

        // The same zeros from a client: a cache miss (the warm-up stored nothing), executed, and counted.
        InferenceRequest same = InferenceRequest.builder("w").input(Tensor.ofFloats("A", new long[] {1, 3}, 0, 0, 0))
                .input(Tensor.ofInts("B", new long[] {1, 1, 2}, 0, 0)).input(Tensor.ofStrings("S", new long[] {1, 2}, "", "")).build();
        h.infer(same).get(10, TimeUnit.SECONDS);
        assertEquals(5, seen.size(), "the client's request executed: the warm-up left nothing in the response cache");
        ModelStatistics s = h.statistics("w", 1).getFirst();
        assertEquals(1, s.success().count());
        assertEquals(1, s.executionCount());
        assertEquals(1, s.cacheMiss().count());
        assertTrue(events.contains("accepted w") && events.contains("batch w 1") && events.contains("ended w SUCCESS"), events.toString());
    }

    @Test
    void builtin_offByDefaultInTheBuilder_andTheParameterOverridesTheHostEitherWay() throws Exception {
        model("plain", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n");
        model("two", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                + "parameters { key: \"builtin_warmup\" value: { string_value: \"2\" } }\n");
        echo("plain");
        echo("two");
        BackplaneHost h = start(false);

        h.load("plain");
        assertEquals(0, seen.size(), "off on a host that did not turn it on");
        h.load("two");
        assertEquals(2, seen.size(), "the parameter's count, on a host where it is off");
        h.close();
        host = null;
        seen.clear();

        model("off", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                + "parameters { key: \"builtin_warmup\" value: { string_value: \"false\" } }\n");
        echo("off");
        BackplaneHost on = start(true);
        on.load("off");
        assertEquals(0, seen.size(), "the parameter switches it off on a host where it is on");
        on.load("plain");
        assertEquals(4, seen.size());
    }

    @Test
    void builtin_badParameter_failsTheLoadNamingTheValue() throws Exception {
        model("bad", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                + "parameters { key: \"builtin_warmup\" value: { string_value: \"lots\" } }\n");
        echo("bad");
        BackplaneHost h = start(true);
        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("bad"));
        assertTrue(e.getMessage().contains("builtin_warmup is 'lots'"), e.getMessage());
        assertEquals(0, backend.instancesCreated.get());
    }

    @Test
    void builtin_failing_isLoggedAndTheModelLoads_whileAFailingModelWarmupSampleFailsTheLoadByName() throws Exception {
        model("picky", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n");
        model("own", """
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
                model_warmup [ { name: "zeros_please" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]
                """);
        ScriptedBackend.Script refuseZeros = (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                seen.add(r);
                if (r.request().input("IN").toFloatArray()[0] == 0) {
                    throw new IllegalArgumentException("zeros are not a valid input here");
                }
                r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN").withName("OUT"))));
            }
        };
        backend.on("picky", refuseZeros);
        backend.on("own", refuseZeros);
        BackplaneHost h = start(true);

        h.load("picky");
        assertTrue(h.isModelReady("picky"), "the made-up data was refused; the model serves anyway");
        assertEquals(1, seen.size(), "the built-in sample stops at its first failure");
        assertEquals(0, inferences(h, "picky"), "the failed warm-up is not counted either");

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("own"));
        assertTrue(e.getMessage().contains("model 'own'") && e.getMessage().contains("warm-up sample 'zeros_please' failed")
                && e.getMessage().contains("zeros are not a valid input here"), e.getMessage());
        assertFalse(h.isModelReady("own"));
        assertEquals(List.of(), events, "no listener event from either warm-up");
    }

    @Test
    void ensembleWarmup_itsStepsInTheComposingModel_reachNoStatisticsEither() throws Exception {
        model("step", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                + "parameters { key: \"builtin_warmup\" value: { string_value: \"false\" } }\n");
        echo("step");
        Path dir = Files.createDirectories(repo.resolve("ens"));
        Files.createDirectories(dir.resolve("1"));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "ens"
                platform: "ensemble"
                input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
                output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
                ensemble_scheduling { step [ { model_name: "step" model_version: -1 input_map { key: "IN" value: "X" }
                                               output_map { key: "OUT" value: "Y" } } ] }
                parameters { key: "builtin_warmup" value: { string_value: "true" } }
                """);
        BackplaneHost h = start(true);

        h.load("ens");

        assertEquals(4, seen.size(), "the ensemble's built-in warm-up (asked for by its config) ran through its step");
        assertEquals(0, inferences(h, "ens"));
        assertEquals(0, inferences(h, "step"), "the steps of a warm-up request are warm-up too");
        assertEquals(List.of(), events);
    }

    /**
     * R1: a backend that runs user code (it does not declare its execute free of side effects) gets
     * no request at load that no client and no config asked for, whatever the host's default: a model
     * that counts its requests, raises on zeros or keeps its sender sees nothing.
     */
    @Test
    void builtin_neverReachesAModelWithSideEffects_unlessItsConfigAsksForIt() throws Exception {
        model("counts", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n");
        model("asks", "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                + "parameters { key: \"builtin_warmup\" value: { string_value: \"true\" } }\n");
        echo("counts");
        echo("asks");
        BackplaneHost h = start(true, false);

        h.load("counts");
        assertTrue(h.isModelReady("counts"));
        assertEquals(0, seen.size(), "a model with side effects received a request nobody sent");
        h.load("asks");
        assertEquals(4, seen.size(), "its config opted in");
        assertTrue(seen.stream().allMatch(r -> r.request().id().equals("warmup-builtin")));
    }

    /**
     * Ready never waits past the budget: a model whose first warm-up request never ends (a decoupled
     * model that keeps its sender, a model that sleeps on zeros) is cancelled when the budget passes
     * (it sees {@code isCancelled}) and loads; before, ready waited for the 2-minute warm-up timeout,
     * past this class's 60 s limit.
     */
    @Test
    void builtin_requestStillRunningAtTheBudget_isCancelled_andTheModelLoads() throws Exception {
        model("keeps", "model_transaction_policy { decoupled: true }\n"
                + "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                + "parameters { key: \"builtin_warmup\" value: { string_value: \"true\" } }\n");
        java.util.concurrent.CompletableFuture<ScheduledRequest> held = new java.util.concurrent.CompletableFuture<>();
        backend.on("keeps", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                seen.add(r);
                held.complete(r); // keeps its sender: never sends FINAL itself
            }
        });
        BackplaneHost h = start(true, false);

        h.load("keeps");

        assertTrue(h.isModelReady("keeps"), "ready once the budget passed");
        ScheduledRequest r = held.get(10, TimeUnit.SECONDS);
        assertTrue(r.isCancelled(), "the warm-up request still running at the budget is cancelled");
        assertEquals(1, seen.size(), "no further warm-up request after the budget");
        r.sender().sendFinal(InferenceResponse.of(List.of()));
        assertEquals(List.of(), events, "nothing of it reaches the listeners");
    }
}
