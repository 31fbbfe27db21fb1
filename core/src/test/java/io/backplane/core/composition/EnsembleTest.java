package io.backplane.core.composition;

import static io.backplane.core.testing.ScriptedBackend.model;
import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.config.BackendCatalog;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.ModelStatistics;
import io.backplane.spi.host.RequestHandle;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The ensemble scheduler on the real core, any backend: the graph, its checks, decoupled steps, C1 and C3. */
@Timeout(60)
class EnsembleTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    private BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private static InferenceResponse longs(String name, long v) {
        return InferenceResponse.of(List.of(Tensor.ofLongs(name, new long[] {1}, v)));
    }

    private static long in(ScheduledRequest r, String name) {
        return r.request().input(name).toLongArray()[0];
    }

    /** An ensemble config as a config.pbtxt would give it, IN → ... → OUT (INT64 [1]). */
    static ModelConfig ensemble(String name, String steps) {
        return ModelConfigParser.parse("name: \"" + name + "\" platform: \"ensemble\" max_batch_size: 0\n"
                + "input [ { name: \"IN\" data_type: TYPE_INT64 dims: [ 1 ] } ]\n"
                + "output [ { name: \"OUT\" data_type: TYPE_INT64 dims: [ 1 ] } ]\n"
                + "ensemble_scheduling { step [ " + steps + " ] }", name + "/config.pbtxt", name, BackendCatalog.NONE);
    }

    static String step(String model, String inKey, String inValue, String outKey, String outValue) {
        return "{ model_name: \"" + model + "\" model_version: -1 input_map { key: \"" + inKey + "\" value: \"" + inValue + "\" }"
                + " output_map { key: \"" + outKey + "\" value: \"" + outValue + "\" } }";
    }

    private static ModelConfig sum() {
        return ModelConfig.builder("sum").backend(ScriptedBackend.NAME).input(TensorConfig.of("A", DataType.INT64, 1))
                .input(TensorConfig.of("B", DataType.INT64, 1)).output(TensorConfig.of("OUT", DataType.INT64, 1)).build();
    }

    private BackplaneHost start(ModelConfig... models) {
        BackplaneHost.Builder b = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT)
                .unloadTimeout(Duration.ofMillis(500));
        for (ModelConfig m : models) {
            b.model(m);
        }
        host = b.build();
        return host;
    }

    private void scriptArithmetic() {
        backend.on("add", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                r.sender().sendFinal(longs("OUT", in(r, "IN") + 1));
            }
        });
        backend.on("mul", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                r.sender().sendFinal(longs("OUT", in(r, "IN") * 10));
            }
        });
        backend.on("sum", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                r.sender().sendFinal(longs("OUT", in(r, "A") + in(r, "B")));
            }
        });
    }

    private static BackplaneException failure(CompletableFuture<?> f) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        return assertInstanceOf(BackplaneException.class, e.getCause());
    }

    @Test
    void chain_twoSteps_outputComposedAndLoadLoadsComposingModels() throws Exception {
        scriptArithmetic();
        start(model("add", false), model("mul", false), ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "OUT")));
        host.load("ens"); // explicit mode: add and mul load with it, as Triton does
        assertTrue(host.isModelReady("add") && host.isModelReady("mul") && host.isModelReady("ens"));
        InferenceResponse r = host.infer(request("ens", 7)).get(10, TimeUnit.SECONDS);
        assertEquals(80, tagOf(r));
        assertEquals("ens", r.modelName());
        assertEquals("ensemble", host.metadata("ens").platform());
        ModelStatistics ens = host.statistics("ens", -1).getFirst();
        assertEquals(1, ens.success().count());
        assertEquals(1, host.statistics("add", -1).getFirst().success().count(), "each step is a request of its composing model");
    }

    @Test
    void callerRuns_idleSteps_runOneAfterTheOtherOnTheCallersThread_neverNested() throws Exception {
        List<Thread> threads = java.util.Collections.synchronizedList(new ArrayList<>());
        AtomicInteger executing = new AtomicInteger();
        AtomicBoolean nested = new AtomicBoolean();
        ScriptedBackend.Script record = (batch, inst) -> {
            threads.add(Thread.currentThread());
            if (executing.incrementAndGet() > 1) {
                nested.set(true);
            }
        };
        backend.on("add", (batch, inst) -> {
            record.execute(batch, inst);
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") + 1));
            executing.decrementAndGet();
        });
        backend.on("mul", (batch, inst) -> {
            record.execute(batch, inst);
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") * 10));
            executing.decrementAndGet();
        });
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).callerRuns(true)
                .model(model("add", false)).model(model("mul", false))
                .model(ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "OUT"))).build();
        host.load("ens");
        CompletableFuture<InferenceResponse> f = host.infer(request("ens", 7));
        assertTrue(f.isDone(), "with idle instances the whole ensemble ran inside infer, on this thread");
        assertEquals(80, tagOf(f.get(10, TimeUnit.SECONDS)));
        assertEquals(List.of(Thread.currentThread(), Thread.currentThread()), threads);
        assertFalse(nested.get(), "the second step started inside the first step's execute");
    }

    /** A step not yet seen to be quick (its executes' average starts high) runs on its own model's worker. */
    @Test
    void defaultHost_stepNotYetQuick_runsOnItsOwnModelsWorker() throws Exception {
        List<Thread> threads = java.util.Collections.synchronizedList(new ArrayList<>());
        backend.on("add", (batch, inst) -> {
            threads.add(Thread.currentThread());
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") + 1));
        });
        backend.on("mul", (batch, inst) -> {
            threads.add(Thread.currentThread());
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") * 10));
        });
        start(model("add", false), model("mul", false), ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "OUT")));
        host.load("ens");
        assertEquals(80, tagOf(host.infer(request("ens", 7)).get(10, TimeUnit.SECONDS)));
        assertEquals(2, threads.size());
        assertTrue(threads.getFirst().getName().contains("-add") && threads.get(1).getName().contains("-mul"), threads.toString());
    }

    /** A decoupled step's response drives the downstream step at once, while its execute still runs (with and without caller-runs). */
    @org.junit.jupiter.params.ParameterizedTest(name = "callerRuns={0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
    void decoupledStep_downstreamRunsWhileItsExecuteStillStreams(boolean callerRuns) throws Exception {
        CountDownLatch downstreamRan = new CountDownLatch(1);
        backend.on("add", (batch, inst) -> {
            downstreamRan.countDown();
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") + 1));
        });
        backend.on("repeat", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            r.sender().send(longs("OUT", in(r, "IN")), 0);
            assertTrue(downstreamRan.await(10, TimeUnit.SECONDS), "the downstream step waited for this execute to return");
            r.sender().send(null, ResponseSender.FINAL);
        });
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).callerRuns(callerRuns)
                .model(model("add", false)).model(model("repeat", true))
                .model(ensemble("ens", step("repeat", "IN", "IN", "OUT", "t") + ", " + step("add", "IN", "t", "OUT", "OUT"))).build();
        host.load("ens");
        CountingRecorder rec = new CountingRecorder();
        host.stream(request("ens", 4), rec);
        assertNull(rec.end.get(10, TimeUnit.SECONDS), "the ensemble succeeded");
        assertEquals(1, rec.terminals.get());
    }

    /**
     * A step that calls the upstream step's model (BLS) must never run on that model's only worker:
     * its wait for the child would need the very worker it borrowed. Many requests in a row, so the
     * steps have time to look quick.
     */
    @Test
    void stepCallingUpstreamModel_manyRequests_neverWaitsOnTheWorkerItBorrowed() throws Exception {
        scriptArithmetic();
        backend.on("bls", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            ChildRequestsTest.Recorder rec = new ChildRequestsTest.Recorder();
            r.startChild(request("add", in(r, "IN")), rec);
            assertNull(rec.end.get(10, TimeUnit.SECONDS));
            r.sender().sendFinal(longs("OUT", tagOf((InferenceResponse) rec.calls.getFirst()) * 10));
        });
        start(model("add", false), model("bls", false), ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("bls", "IN", "t", "OUT", "OUT")));
        host.load("ens");
        for (int i = 0; i < 300; i++) {
            assertEquals((i + 2) * 10, tagOf(host.infer(request("ens", i)).get(10, TimeUnit.SECONDS)), "request " + i);
        }
    }

    @Test
    void responseCache_onTheEnsemble_secondIdenticalRequestRunsNoStep() throws Exception {
        AtomicInteger executions = new AtomicInteger();
        scriptArithmetic();
        backend.on("add", (batch, inst) -> {
            executions.incrementAndGet();
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") + 1));
        });
        ModelConfig cached = ModelConfigParser.parse("name: \"ens\" platform: \"ensemble\" response_cache { enable: true }\n"
                + "input [ { name: \"IN\" data_type: TYPE_INT64 dims: [ 1 ] } ] output [ { name: \"OUT\" data_type: TYPE_INT64 dims: [ 1 ] } ]\n"
                + "ensemble_scheduling { step [ " + step("add", "IN", "IN", "OUT", "OUT") + " ] }", "ens/config.pbtxt", "ens", BackendCatalog.NONE);
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofMillis(500))
                .responseCache(1 << 20).model(model("add", false)).model(cached).loadModel("ens").build();
        assertEquals(5, tagOf(host.infer(request("ens", 4)).get(10, TimeUnit.SECONDS)));
        assertEquals(5, tagOf(host.infer(request("ens", 4)).get(10, TimeUnit.SECONDS)));
        assertEquals(1, executions.get(), "the second request was answered from the cache before any step ran");
    }

    @Test
    void diamond_independentStepsRunInParallel_thenJoin() throws Exception {
        CountDownLatch bothRunning = new CountDownLatch(2);
        ScriptedBackend.Script waitForSibling = (batch, inst) -> {
            bothRunning.countDown();
            assertTrue(bothRunning.await(10, TimeUnit.SECONDS), "the sibling step never ran beside this one");
        };
        scriptArithmetic();
        backend.on("add", (batch, inst) -> {
            waitForSibling.execute(batch, inst);
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") + 1));
        });
        backend.on("mul", (batch, inst) -> {
            waitForSibling.execute(batch, inst);
            batch.getFirst().sender().sendFinal(longs("OUT", in(batch.getFirst(), "IN") * 10));
        });
        start(model("add", false), model("mul", false), sum(), ensemble("ens", step("add", "IN", "IN", "OUT", "x") + ", "
                + step("mul", "IN", "IN", "OUT", "y") + ", { model_name: \"sum\" input_map [ { key: \"A\" value: \"x\" }, { key: \"B\" value: \"y\" } ]"
                + " output_map { key: \"OUT\" value: \"OUT\" } }"));
        host.load("ens");
        assertEquals(3 + 1 + 30, tagOf(host.infer(request("ens", 3)).get(10, TimeUnit.SECONDS)));
    }

    @Test
    void decoupledStep_everyResponseDrivesDownstream_ensembleIsDecoupled() throws Exception {
        scriptArithmetic();
        backend.on("repeat", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            long n = in(r, "IN");
            for (long i = 0; i < n; i++) {
                r.sender().send(longs("OUT", i * 100), 0);
            }
            r.sender().send(null, ResponseSender.FINAL);
        });
        start(model("repeat", true), model("add", false), ensemble("ens", step("repeat", "IN", "IN", "OUT", "t") + ", " + step("add", "IN", "t", "OUT", "OUT")));
        host.load("ens");
        assertTrue(host.modelConfig("ens", -1).decoupled(), "an ensemble with a decoupled step is decoupled");
        assertEquals(ErrorCode.INVALID_ARGUMENT, failure(host.infer(request("ens", 3))).code(), "a decoupled ensemble needs a stream");
        ChildRequestsTest.Recorder rec = new ChildRequestsTest.Recorder();
        host.stream(request("ens", 3), rec);
        assertNull(rec.end.get(10, TimeUnit.SECONDS));
        List<Long> values = new ArrayList<>();
        for (Object c : rec.calls) {
            if (c instanceof InferenceResponse resp) {
                values.add(tagOf(resp));
            }
        }
        values.sort(null);
        assertEquals(List.of(1L, 101L, 201L), values);
        assertEquals("complete", rec.calls.getLast(), "the final flag comes after the last downstream response");
    }

    @Test
    void stepFails_ensembleFailsOnceNamingStep_siblingCancelled_C3() throws Exception {
        CountDownLatch siblingRuns = new CountDownLatch(1);
        AtomicBoolean siblingSawCancel = new AtomicBoolean();
        scriptArithmetic();
        backend.on("mul", (batch, inst) -> {
            siblingRuns.countDown();
            ScheduledRequest r = batch.getFirst();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!r.isCancelled() && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            siblingSawCancel.set(r.isCancelled());
            r.sender().sendFinal(InferenceResponse.error(new BackplaneException(ErrorCode.CANCELLED, "stopped")));
        });
        backend.on("add", (batch, inst) -> {
            assertTrue(siblingRuns.await(10, TimeUnit.SECONDS));
            throw new IllegalStateException("boom in add");
        });
        AtomicInteger ensembleEnds = new AtomicInteger();
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofMillis(500))
                .model(model("add", false)).model(model("mul", false)).model(sum())
                .model(ensemble("ens", step("add", "IN", "IN", "OUT", "x") + ", " + step("mul", "IN", "IN", "OUT", "y")
                        + ", { model_name: \"sum\" input_map [ { key: \"A\" value: \"x\" }, { key: \"B\" value: \"y\" } ] output_map { key: \"OUT\" value: \"OUT\" } }"))
                .listener(new HostListener() {
                    @Override
                    public void requestEnded(String model, long version, Outcome outcome, long q, long c) {
                        if (model.equals("ens")) {
                            ensembleEnds.incrementAndGet();
                        }
                    }
                }).build();
        host.load("ens");
        BackplaneException e = failure(host.infer(request("ens", 1)));
        assertTrue(e.getMessage().contains("step 0 (model 'add')") && e.getMessage().contains("boom in add"), e.getMessage());
        host.unload("mul"); // waits for mul's open requests: the sibling step has ended
        assertTrue(siblingSawCancel.get(), "the sibling step saw the cancellation");
        assertEquals(1, ensembleEnds.get(), "the ensemble request ended exactly once");
        assertEquals(0, host.openRequests());
    }

    @Test
    void cancelEnsemble_reachesRunningStep_endsOnceCancelled() throws Exception {
        CountDownLatch running = new CountDownLatch(1);
        backend.on("add", (batch, inst) -> {
            running.countDown();
            ScheduledRequest r = batch.getFirst();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!r.isCancelled() && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            r.sender().sendFinal(InferenceResponse.error(new BackplaneException(ErrorCode.CANCELLED, "add saw the cancel")));
        });
        start(model("add", false), model("mul", false), ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "OUT")));
        host.load("ens");
        ChildRequestsTest.Recorder rec = new ChildRequestsTest.Recorder();
        RequestHandle h = host.stream(request("ens", 1), rec);
        assertTrue(running.await(10, TimeUnit.SECONDS));
        h.cancel();
        BackplaneException e = rec.end.get(10, TimeUnit.SECONDS);
        assertEquals(ErrorCode.CANCELLED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("add saw the cancel"), e.getMessage());
        assertEquals(1, rec.calls.size());
    }

    @Test
    void composingModelUnloaded_ensembleNotReady_reloadedReadyAgain() throws Exception {
        scriptArithmetic();
        start(model("add", false), model("mul", false), ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "OUT")));
        host.load("ens");
        host.unload("mul");
        assertFalse(host.isModelReady("ens"), "an ensemble with a missing composing model is not ready");
        assertFalse(host.isReady());
        BackplaneException e = failure(host.infer(request("ens", 1)));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("step 1 (model 'mul')"), e.getMessage());
        host.load("mul");
        assertTrue(host.isModelReady("ens"));
        assertEquals(20, tagOf(host.infer(request("ens", 1)).get(10, TimeUnit.SECONDS)));
    }

    @Test
    void load_badGraphs_refusedNamingStepAndTensor() {
        scriptArithmetic();
        ModelConfig typed = ModelConfig.builder("floaty").backend(ScriptedBackend.NAME).input(TensorConfig.of("IN", DataType.FP32, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).build();
        start(model("add", false), model("mul", false), typed,
                ensemble("unknownModel", step("nope", "IN", "IN", "OUT", "OUT")),
                ensemble("badInput", step("add", "X", "IN", "OUT", "OUT")),
                ensemble("badOutput", step("add", "IN", "IN", "Y", "OUT")),
                ensemble("badType", step("floaty", "IN", "IN", "OUT", "OUT")),
                ensemble("neverProduced", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "u")),
                ensemble("unused", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "IN", "OUT", "OUT")),
                ensemble("cycle", step("add", "IN", "u", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "u") + ", " + step("mul", "IN", "IN", "OUT", "OUT")),
                ensemble("twice", step("add", "IN", "IN", "OUT", "OUT") + ", " + step("mul", "IN", "IN", "OUT", "OUT")));
        assertRefused("unknownModel", "step 0 (model 'nope')", "Request for unknown model: 'nope' is not found");
        assertRefused("badInput", "step 0 (model 'add')", "input 'X'");
        assertRefused("badOutput", "step 0 (model 'add')", "output 'Y'");
        assertRefused("badType", "step 0 (model 'floaty')", "TYPE_FP32");
        assertRefused("neverProduced", "output 'OUT'", "not produced");
        assertRefused("unused", "step 0 (model 'add')", "'t', which no step reads");
        assertRefused("cycle", "form a cycle", "step 0 (model 'add')");
        assertRefused("twice", "step 1 (model 'mul')", "already produces");
        assertTrue(host.isModelReady("add"), "the host keeps serving its other models");
    }

    private void assertRefused(String ensemble, String... parts) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.load(ensemble));
        for (String p : parts) {
            assertTrue(e.getMessage().contains(p), "'" + p + "' missing from: " + e.getMessage());
        }
    }

    @Test
    void config_platformWithoutSection_andSectionWithoutPlatform_refused() {
        BackplaneException a = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(
                "name: \"e\" platform: \"ensemble\"", "e/config.pbtxt", "e", BackendCatalog.NONE));
        assertTrue(a.getMessage().contains("no ensemble_scheduling"), a.getMessage());
        BackplaneException b = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(
                "name: \"e\" backend: \"python\" ensemble_scheduling { step [ { model_name: \"m\" } ] }", "e/config.pbtxt", "e", BackendCatalog.NONE));
        assertTrue(b.getMessage().contains("needs platform: \"ensemble\""), b.getMessage());
        BackplaneException c = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(
                "name: \"e\" platform: \"ensemble\" ensemble_scheduling { step [ { model_nam: \"m\" } ] }", "e/config.pbtxt", "e", BackendCatalog.NONE));
        assertTrue(c.getMessage().contains("model_nam"), c.getMessage());
        BackplaneException d = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(
                "name: \"e\" platform: \"ensemble\" instance_group [ { count: 2 } ] ensemble_scheduling { step [ { model_name: \"m\" } ] }",
                "e/config.pbtxt", "e", BackendCatalog.NONE));
        assertTrue(d.getMessage().contains("an ensemble has no instances"), d.getMessage());
    }

    /**
     * Many concurrent ensemble requests race random cancellation and unload/reload of a composing
     * model: every request ends exactly once (counted at its observer and at the listener), and
     * nothing stays open.
     */
    @RepeatedTest(3)
    void randomized_requestsRaceCancelAndReload_eachEndsExactlyOnce() throws Exception {
        raceCancelAndReload(false);
    }

    /** The same race with caller-runs: steps run on the callers' and workers' threads (StepTrampoline). */
    @RepeatedTest(3)
    void randomized_callerRuns_requestsRaceCancelAndReload_eachEndsExactlyOnce() throws Exception {
        raceCancelAndReload(true);
    }

    private void raceCancelAndReload(boolean callerRuns) throws Exception {
        ConcurrentHashMap<String, AtomicInteger> ends = new ConcurrentHashMap<>();
        backend.on("add", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                if (ThreadLocalRandom.current().nextInt(4) == 0) {
                    Thread.onSpinWait();
                }
                r.sender().sendFinal(longs("OUT", in(r, "IN") + 1));
            }
        });
        backend.on("repeat", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            for (int i = 0; i < 3 && !r.isCancelled(); i++) {
                r.sender().send(longs("OUT", in(r, "IN")), 0);
            }
            r.sender().send(null, ResponseSender.FINAL);
        });
        AtomicInteger ensembleEnds = new AtomicInteger();
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofMillis(500))
                .callerRuns(callerRuns).model(model("add", false)).model(model("repeat", true))
                .model(ensemble("ens", step("repeat", "IN", "IN", "OUT", "t") + ", " + step("add", "IN", "t", "OUT", "OUT")))
                .listener(new HostListener() {
                    @Override
                    public void requestEnded(String model, long version, Outcome outcome, long q, long c) {
                        if (model.equals("ens")) {
                            ensembleEnds.incrementAndGet();
                        }
                    }
                }).build();
        host.load("ens");
        int threads = 8;
        int perThread = 40;
        AtomicInteger accepted = new AtomicInteger();
        CountDownLatch gate = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        List<CountingRecorder> recorders = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    gate.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < perThread; i++) {
                    CountingRecorder rec = new CountingRecorder();
                    recorders.add(rec);
                    RequestHandle h = host.stream(request("ens", i), rec);
                    if (h.id() != 0) {
                        accepted.incrementAndGet();
                    }
                    if (ThreadLocalRandom.current().nextBoolean()) {
                        h.cancel();
                    }
                }
            }));
        }
        Thread reloader = Thread.ofPlatform().start(() -> {
            try {
                gate.await();
                for (int i = 0; i < 5; i++) {
                    host.unload("add");
                    host.load("add");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        gate.countDown();
        for (Thread w : workers) {
            w.join();
        }
        reloader.join();
        for (CountingRecorder r : recorders) {
            r.end.get(10, TimeUnit.SECONDS);
            assertEquals(1, r.terminals.get(), "one terminal call per request");
        }
        host.unload("ens");
        assertEquals(accepted.get(), ensembleEnds.get(), "every accepted ensemble request ended exactly once");
        assertEquals(0, host.openRequests());
    }

    /**
     * A reload of a composing model keeps it serving (L9), so ensemble requests racing reloads all
     * succeed. (A step routed to the old version in the instant before the swap is routed again
     * once; that window is too narrow for this test to hit reliably.)
     */
    @RepeatedTest(3)
    void composingModelReloaded_racingRequestsAllSucceed() throws Exception {
        scriptArithmetic();
        start(model("add", false), model("mul", false), ensemble("ens", step("add", "IN", "IN", "OUT", "t") + ", " + step("mul", "IN", "t", "OUT", "OUT")));
        host.load("ens");
        CountDownLatch gate = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < 4; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    gate.await();
                    for (int i = 0; i < 100; i++) {
                        assertEquals((i + 1) * 10L, tagOf(host.infer(request("ens", i)).get(10, TimeUnit.SECONDS)));
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        gate.countDown();
        for (int i = 0; i < 5; i++) {
            host.load("mul"); // reload: the new version loads beside the old, then the old drains
        }
        for (Thread w : workers) {
            w.join();
        }
        assertEquals(List.of(), failures);
        assertEquals(0, host.openRequests());
    }

    /** Counts an observer's terminal calls; {@code end} completes at the first. */
    static final class CountingRecorder implements io.backplane.spi.host.ResponseObserver {
        final AtomicInteger terminals = new AtomicInteger();
        final CompletableFuture<BackplaneException> end = new CompletableFuture<>();

        @Override
        public void onResponse(InferenceResponse response) {
        }

        @Override
        public void onComplete() {
            terminals.incrementAndGet();
            end.complete(null);
        }

        @Override
        public void onError(BackplaneException error) {
            terminals.incrementAndGet();
            end.complete(error);
        }
    }
}
