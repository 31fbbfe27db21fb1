package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * BLS ({@code pb_utils.InferenceRequest.exec/async_exec}) and custom metrics
 * ({@code pb_utils.MetricFamily}) through the real host, real stubs, the real ONNX backend and
 * the real {@code /metrics} endpoint.
 */
class BlsHostTest {
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

    private BackplaneHost host(int waiterInstances, String... models) throws Exception {
        BackplaneHost.Builder b = BackplaneHost.builder().modelRepository(BlsRepository.write(temp, waiterInstances))
                .modelControlMode(ModelControlMode.EXPLICIT);
        for (String m : models) {
            b.loadModel(m);
        }
        return b.build();
    }

    static InferenceRequest caller(String callerModel, String target, float... a) {
        float[] b = new float[a.length];
        java.util.Arrays.fill(b, 1);
        return InferenceRequest.builder(callerModel).input(Tensor.ofFloats("INPUT0", new long[] {a.length}, a))
                .input(Tensor.ofFloats("INPUT1", new long[] {b.length}, b)).input(Tensor.ofStrings("MODEL_NAME", new long[] {1}, target)).build();
    }

    static BackplaneException failure(CompletableFuture<?> f) throws Exception {
        try {
            f.get(60, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return assertInstanceOf(BackplaneException.class, e.getCause());
        }
        throw new AssertionError("the request succeeded");
    }

    /**
     * Issue 33 (Triton's async_execute concurrency_test, the BLS cases): many coroutine executes
     * in flight on one stub, batched, each awaiting several {@code async_exec(decoupled=True)}
     * calls to a decoupled async model at once, from callers released together with random
     * jitter: every BLS response carries its output tensor (the model raises otherwise), and
     * every caller gets exactly its own children's values.
     */
    @Test
    void asyncExecute_manyConcurrentBlsCalls_everyResponseCarriesItsOwnOutput() throws Exception {
        try (BackplaneHost host = host(1, "async_sleeper", "async_bls_fanout")) {
            int callers = 24;
            int rounds = 4;
            java.util.concurrent.CountDownLatch gate = new java.util.concurrent.CountDownLatch(1);
            List<CompletableFuture<Void>> all = new java.util.ArrayList<>();
            for (int c = 0; c < callers; c++) {
                int caller = c;
                all.add(CompletableFuture.runAsync(() -> {
                    try {
                        gate.await();
                        java.util.Random random = new java.util.Random(caller);
                        for (int round = 0; round < rounds; round++) {
                            Thread.sleep(random.nextInt(15));
                            int id = caller * rounds + round + 1;
                            int fanout = 1 + random.nextInt(6);
                            List<Integer> got = fanout(host, id, fanout);
                            List<Integer> want = new java.util.ArrayList<>();
                            for (int k = 0; k < fanout; k++) {
                                want.add(id * 100 + k);
                            }
                            java.util.Collections.sort(got);
                            assertEquals(want, got, "request " + id + " with " + fanout + " BLS calls");
                        }
                    } catch (Exception e) {
                        throw new java.util.concurrent.CompletionException(e);
                    }
                }, Thread::startVirtualThread));
            }
            gate.countDown();
            CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)).get(180, TimeUnit.SECONDS);
            assertEquals(0, host.openRequests());
        }
    }

    /** One streamed request to async_bls_fanout: the OUT of each response, after it completed without error. */
    private static List<Integer> fanout(BackplaneHost host, int id, int fanout) throws Exception {
        InferenceRequest req = InferenceRequest.builder("async_bls_fanout").input(Tensor.ofInts("ID", new long[] {1, 1}, id))
                .input(Tensor.ofInts("FANOUT", new long[] {1, 1}, fanout)).build();
        Streamed.Result r = Streamed.collect(host, req, 60);
        assertEquals(null, r.error(), "request " + id + ": " + r.error());
        List<Integer> got = new java.util.ArrayList<>();
        for (InferenceResponse response : r.responses()) {
            for (int v : response.output("OUT").toIntArray()) {
                got.add(v);
            }
        }
        return got;
    }

    @Test
    void exec_toPythonAndOnnxModels_returnsTheirOutputs() throws Exception {
        try (BackplaneHost host = host(1, "add_sub", "onnx_add_sub", "bls_caller")) {
            for (String target : List.of("add_sub", "onnx_add_sub")) {
                InferenceResponse r = host.infer(caller("bls_caller", target, 5, 6, 7, 8)).get(60, TimeUnit.SECONDS);
                assertArrayEquals(new float[] {6, 7, 8, 9}, r.output("OUTPUT0").toFloatArray(), target);
                assertArrayEquals(new float[] {4, 5, 6, 7}, r.output("OUTPUT1").toFloatArray(), target);
            }
            assertEquals(0, host.openRequests());
        }
    }

    @Test
    void exec_unknownModel_isAnErrorResponseWithNotFound() throws Exception {
        try (BackplaneHost host = host(1, "bls_caller")) {
            BackplaneException e = failure(host.infer(caller("bls_caller", "no_such_model", 1, 2, 3, 4)));
            // the caller forwards the TritonError it got: NOT_FOUND is Triton code 2
            assertTrue(e.getMessage().contains("BLS to 'no_such_model' failed (code 2)"), e.getMessage());
            assertTrue(e.getMessage().contains("Request for unknown model: 'no_such_model' is not found"), e.getMessage()); // Triton's sentence (core, since 5bf530b)
        }
    }

    /**
     * Every BLS mode (exec, exec(decoupled=True), async_exec awaited, async_exec(decoupled=True)
     * awaited as in Triton's examples/bls_decoupled or iterated with async for) from a plain and a
     * decoupled model, each with a synchronous and a coroutine execute; and the model_name types
     * Triton's binding accepts, with its TypeError for the others.
     */
    @Test
    void blsModes_fromPlainDecoupledAndAsyncModels_allWorkAsInTriton() throws Exception {
        List<String> models = List.of("bls_modes", "bls_modes_decoupled", "bls_modes_async", "bls_modes_async_decoupled");
        String[] load = new String[models.size() + 2];
        load[0] = "add_sub";
        load[1] = "square";
        for (int i = 0; i < models.size(); i++) {
            load[i + 2] = models.get(i);
        }
        try (BackplaneHost host = host(1, load)) {
            for (String model : models) {
                InferenceRequest req = InferenceRequest.builder(model).input(Tensor.ofInts("IN", new long[] {1}, 3))
                        .input(Tensor.ofStrings("TARGET", new long[] {1}, "add_sub")).build();
                Streamed.Result r = Streamed.collect(host, req, 60);
                assertEquals(null, r.error(), model + ": " + r.error());
                List<InferenceResponse> got = r.responses();
                assertEquals(1, got.size(), model);
                com.fasterxml.jackson.databind.JsonNode rep = StubJson.MAPPER.readTree(got.get(0).output("REPORT").toStringList().get(0));
                assertEquals(model.endsWith("_decoupled"), rep.get("decoupled_model").asBoolean(), model);
                String sums = "[11.0,22.0]", squares = "[9,9,9]";
                assertEquals("bytes", rep.get("target_type").asText(), model + ": a TYPE_STRING element is bytes");
                for (String key : List.of("name_tensor", "name_str", "name_bytes", "name_numpy_bytes", "name_numpy_str", "exec", "async_exec")) {
                    assertEquals(sums, rep.get(key).toString(), model + " " + key);
                }
                for (String key : List.of("exec_decoupled", "await_async_exec_decoupled", "async_for_await_async_exec_decoupled",
                        "async_for_async_exec_decoupled")) {
                    assertEquals(squares, rep.get(key).toString(), model + " " + key);
                }
                assertEquals("[" + sums + "," + squares + "]", rep.get("gather").toString(), model);
                assertEquals("AsyncResponseIterator", rep.get("await_async_exec_decoupled_type").asText(), model);
                for (String key : List.of("bad_int", "bad_none", "bad_list")) {
                    String m = rep.get(key).asText();
                    assertTrue(m.startsWith("__init__(): incompatible constructor arguments. The following argument types are supported:"),
                            model + " " + key + ": " + m);
                    assertTrue(m.contains("model_name must be a str or bytes"), m);
                }
            }
            assertEquals(0, host.openRequests());
        }
    }

    @Test
    void exec_requestParameters_reachTheCallee() throws Exception {
        try (BackplaneHost host = host(1, "params_echo", "bls_params_caller")) {
            InferenceResponse r = host.infer(InferenceRequest.builder("bls_params_caller").input(Tensor.ofFloats("X", new long[] {1}, 1)).build())
                    .get(60, TimeUnit.SECONDS);
            assertEquals(List.of("ok"), r.output("P").toStringList());
        }
    }

    /** qa bls_memory: many 1 MiB calls through regions bounded at 8 MiB; a leaked block would exhaust them. */
    @Test
    void exec_manyLargeCalls_sharedMemoryIsReused() throws Exception {
        Path repo = BlsRepository.write(temp, 1);
        for (String m : List.of("bls_caller", "add_sub")) {
            Path config = repo.resolve(m).resolve("config.pbtxt");
            java.nio.file.Files.writeString(config, java.nio.file.Files.readString(config)
                    + "parameters { key: \"shm_max_bytes\" value: { string_value: \"8388608\" } }\n");
        }
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).loadModel("add_sub")
                .loadModel("bls_caller").build()) {
            float[] a = new float[262_144];
            for (int i = 0; i < a.length; i++) {
                a[i] = i;
            }
            for (int i = 0; i < 40; i++) {
                InferenceResponse r = host.infer(caller("bls_caller", "add_sub", a)).get(60, TimeUnit.SECONDS);
                float[] out = r.output("OUTPUT0").toFloatArray();
                assertEquals(a.length, out.length);
                assertEquals(a.length, out[a.length - 1], "(a+1) at the last element, call " + i);
            }
        }
    }

    @Test
    void exec_inInitialize_failsTheLoadWithAClearError() throws Exception {
        try (BackplaneHost host = host(1)) {
            BackplaneException e = org.junit.jupiter.api.Assertions.assertThrows(BackplaneException.class, () -> host.load("bls_in_init"));
            assertTrue(e.getMessage().contains("only possible while the model executes a request"), e.getMessage());
        }
    }

    @Test
    void asyncExec_twoConcurrentCalls_gathered() throws Exception {
        try (BackplaneHost host = host(1, "add_sub", "bls_async_caller")) {
            InferenceResponse r = host.infer(caller("bls_async_caller", "", 5, 6, 7, 8)).get(60, TimeUnit.SECONDS);
            assertArrayEquals(new float[] {10, 12, 14, 16}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {2, 2, 2, 2}, r.output("OUTPUT1").toFloatArray());
        }
    }

    @Test
    void execDecoupled_streamsEveryResponseInOrder() throws Exception {
        try (BackplaneHost host = host(1, "square", "bls_stream_caller")) {
            InferenceResponse r = host.infer(InferenceRequest.builder("bls_stream_caller").input(Tensor.ofInts("IN", new long[] {1}, 5)).build())
                    .get(60, TimeUnit.SECONDS);
            assertArrayEquals(new int[] {25, 25, 25, 25, 25}, r.output("OUT").toIntArray());
        }
    }

    private static InferenceRequest waiter(float millis, String target) {
        return InferenceRequest.builder("bls_waiter").input(Tensor.ofFloats("X", new long[] {1}, millis))
                .input(Tensor.ofStrings("TARGET", new long[] {1}, target)).build();
    }

    @Test
    void exec_toItselfWithItsOnlyInstanceBusy_failsInsteadOfDeadlocking() throws Exception {
        try (BackplaneHost host = host(1, "slow_echo", "bls_waiter")) {
            BackplaneException e = failure(host.infer(waiter(1, "bls_waiter")));
            assertTrue(e.getMessage().contains("(its own model) but all 1 instance(s)"), e.getMessage());
            assertEquals(ErrorCode.UNAVAILABLE, e.code());
            assertEquals(1f, host.infer(waiter(1, "slow_echo")).get(60, TimeUnit.SECONDS).output("Y").toFloatArray()[0]);
        }
    }

    @Test
    void exec_toItselfWithAFreeInstance_runsThere() throws Exception {
        try (BackplaneHost host = host(2, "slow_echo", "bls_waiter")) {
            assertEquals(3f, host.infer(waiter(3, "bls_waiter")).get(60, TimeUnit.SECONDS).output("Y").toFloatArray()[0]);
        }
    }

    @Test
    void cancelParent_cancelsItsRunningChild() throws Exception {
        try (BackplaneHost host = host(1, "slow_echo", "bls_waiter")) {
            CompletableFuture<InferenceResponse> f = host.infer(waiter(600_000, "slow_echo"));
            awaitOpen(host, 2); // the parent and its child run
            f.cancel(true);
            awaitOpen(host, 0); // the child ended too, long before its 10 minutes
            assertEquals(0, host.openRequests());
        }
    }

    @Test
    void unloadParentModel_cancelsItsChildren() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(BlsRepository.write(temp, 1)).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("slow_echo").loadModel("bls_waiter").unloadTimeout(java.time.Duration.ofMillis(500)).build()) {
            CompletableFuture<InferenceResponse> f = host.infer(waiter(600_000, "slow_echo"));
            awaitOpen(host, 2);
            host.unload("bls_waiter");
            assertEquals(ErrorCode.UNAVAILABLE, failure(f).code());
            awaitOpen(host, 0);
            assertTrue(host.isModelReady("slow_echo"));
        }
    }

    static void awaitOpen(BackplaneHost host, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (host.openRequests() != n) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("open requests stayed " + host.openRequests() + ", expected " + n);
            }
            Thread.sleep(5);
        }
    }

    @Test
    void customMetrics_exportedOnMetricsEndpoint_andGoneAfterUnload() throws Exception {
        try (BackplaneHost host = host(1, "metrics_user")) {
            Frontend metrics = host.frontendFactories().get("metrics").create(new FrontendContext() {
                @Override
                public InferenceService service() {
                    return host;
                }

                @Override
                public Map<String, String> options() {
                    return Map.of("host", "127.0.0.1", "port", "0");
                }
            });
            try {
                metrics.start();
                for (int i = 1; i <= 3; i++) {
                    InferenceResponse r = host.infer(InferenceRequest.builder("metrics_user").input(Tensor.ofInts("X", new long[] {i * 3}, new int[i * 3]))
                            .build()).get(60, TimeUnit.SECONDS);
                    assertEquals(List.of(Integer.toString(i)), r.output("Y").toStringList());
                }
                InferenceResponse rules = host.infer(InferenceRequest.builder("metrics_user").input(Tensor.ofInts("X", new long[] {1}, -1)).build())
                        .get(60, TimeUnit.SECONDS);
                assertEquals(Collections.nCopies(18, "ok"), rules.output("Y").toStringList());
                String text = scrape(metrics.endpoint());
                assertTrue(text.contains("# HELP bp_test_requests_total requests seen by metrics_user\n# TYPE bp_test_requests_total counter\n"), text);
                assertTrue(text.contains("bp_test_requests_total{model=\"metrics_user\",version=\"1\"} 4\n"), text);
                assertTrue(text.contains("bp_test_input_size_bucket{model=\"metrics_user\",le=\"4\"} 2\n"), text); // sizes 3, 1
                assertTrue(text.contains("bp_test_input_size_bucket{model=\"metrics_user\",le=\"16\"} 4\n"), text);
                assertTrue(text.contains("bp_test_input_size_sum{model=\"metrics_user\"} 19\n"), text);
                assertTrue(text.contains("# HELP bp_test_gauge first description\n"), text);
                assertTrue(text.contains("bp_test_gauge{k=\"v\"} 4\n"), text);
                assertTrue(text.contains("bp_test_inf_only_bucket{le=\"+Inf\"} 1\nbp_test_inf_only_sum 3\nbp_test_inf_only_count 1\n"), text);
                assertTrue(!text.contains("bp_test_lifetime"), "a deleted family and its metric are gone from the host: " + text);
                assertTrue(text.contains("backplane_"), "built-in series beside the custom ones");
                host.unload("metrics_user");
                String after = scrape(metrics.endpoint());
                assertTrue(!after.contains("bp_test_"), after);
            } finally {
                metrics.close();
            }
        }
    }

    static String scrape(String endpoint) throws Exception {
        try (HttpClient c = HttpClient.newHttpClient()) {
            HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create(endpoint)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode());
            return r.body();
        }
    }
}
