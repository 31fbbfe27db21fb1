package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelConfigRequest;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelMetadataRequest;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.backplane.testkit.Await;
import io.grpc.stub.StreamObserver;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Ensembles through the real REST and gRPC frontends, built like Triton's own: two python add_sub
 * steps chained (Triton's {@code qa/python_models/ensemble}), a python pre-processing model feeding
 * the committed ONNX add_sub model of the cpu backend, and a decoupled step (square) followed by a
 * per-response step (negate).
 */
class EnsembleServeTest {
    @TempDir
    Path temp;

    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();
    private static final Path PARTS = Path.of("src/test/resources/ensemble").toAbsolutePath();
    private static final Path ONNX_ADD_SUB = Path.of("../cpu/src/test/resources/models/add_sub/1/model.onnx").toAbsolutePath();

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    private static final String TRITON_ENSEMBLE = """
            name: "ensemble"
            platform: "ensemble"
            max_batch_size: 0
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
            ensemble_scheduling {
              step [
                {
                  model_name: "add_sub_1"
                  model_version: -1
                  input_map { key: "INPUT0" value: "INPUT0" }
                  input_map { key: "INPUT1" value: "INPUT1" }
                  output_map { key: "OUTPUT0" value: "temp_0" }
                  output_map { key: "OUTPUT1" value: "temp_1" }
                },
                {
                  model_name: "add_sub_2"
                  model_version: -1
                  input_map { key: "INPUT0" value: "temp_0" }
                  input_map { key: "INPUT1" value: "temp_1" }
                  output_map { key: "OUTPUT0" value: "OUTPUT0" }
                  output_map { key: "OUTPUT1" value: "OUTPUT1" }
                }
              ]
            }
            """;

    private static final String PREPROCESS = """
            name: "preprocess"
            backend: "python"
            max_batch_size: 8
            input [ { name: "RAW" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """;

    private static final String PIPELINE = """
            name: "pipeline"
            platform: "ensemble"
            max_batch_size: 8
            input [ { name: "RAW" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
            ensemble_scheduling {
              step [
                { model_name: "preprocess" model_version: -1 input_map { key: "RAW" value: "RAW" }
                  output_map [ { key: "INPUT0" value: "a" }, { key: "INPUT1" value: "b" } ] },
                { model_name: "add_sub" model_version: 1 input_map [ { key: "INPUT0" value: "a" }, { key: "INPUT1" value: "b" } ]
                  output_map [ { key: "OUTPUT0" value: "SUM" }, { key: "OUTPUT1" value: "DIFF" } ] }
              ]
            }
            """;

    private static final String NEGATE = """
            name: "negate"
            backend: "python"
            input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """;

    private static final String SQUARE_NEGATED = """
            name: "square_negated"
            platform: "ensemble"
            input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            ensemble_scheduling {
              step [
                { model_name: "square" input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "squared" } },
                { model_name: "negate" input_map { key: "IN" value: "squared" } output_map { key: "OUT" value: "OUT" } }
              ]
            }
            """;

    private Path repository() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        for (String n : List.of("add_sub_1", "add_sub_2")) {
            model(repo, n, HostEndToEndTest.ADD_SUB.replace("name: \"add_sub\"", "name: \"" + n + "\""), Harness.MODELS.resolve("add_sub/1/model.py"), "model.py");
        }
        model(repo, "ensemble", TRITON_ENSEMBLE, null, null);
        model(repo, "preprocess", PREPROCESS, PARTS.resolve("preprocess.py"), "model.py");
        model(repo, "add_sub", Files.readString(ONNX_ADD_SUB.getParent().getParent().resolve("config.pbtxt")), ONNX_ADD_SUB, "model.onnx");
        model(repo, "pipeline", PIPELINE, null, null);
        model(repo, "square", HostEndToEndTest.SQUARE, Harness.MODELS.resolve("square/1/model.py"), "model.py");
        model(repo, "negate", NEGATE, PARTS.resolve("negate.py"), "model.py");
        model(repo, "square_negated", SQUARE_NEGATED, null, null);
        return repo;
    }

    private static void model(Path repo, String name, String config, Path file, String fileName) throws Exception {
        Path version = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), config);
        if (file != null) {
            Files.copy(file, version.resolve(fileName));
        }
    }

    @Test
    void rest_tritonEnsembleAndPythonToOnnxPipeline_answerAndDescribeThemselves() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("ensemble").loadModel("pipeline").build();
                Frontend f = host.frontendFactories().get("http").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")));
                Frontend metrics = host.frontendFactories().get("metrics").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            metrics.start();
            String base = f.endpoint();
            assertTrue(host.isModelReady("add_sub_1") && host.isModelReady("add_sub_2"), "loading the ensemble loaded its composing models");

            HttpResponse<String> r = post(base + "/v2/models/ensemble/infer", "{\"inputs\":["
                    + "{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,2,3,4]},"
                    + "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,1,1,1]}]}");
            assertEquals(200, r.statusCode(), r.body());
            JsonNode out = StubJson.MAPPER.readTree(r.body());
            assertEquals("ensemble", out.get("model_name").asText());
            assertEquals(List.of(2.0, 4.0, 6.0, 8.0), floats(output(out, "OUTPUT0")), r.body()); // (a+b)+(a-b)
            assertEquals(List.of(2.0, 2.0, 2.0, 2.0), floats(output(out, "OUTPUT1")), r.body()); // (a+b)-(a-b)

            r = post(base + "/v2/models/pipeline/infer", "{\"inputs\":[{\"name\":\"RAW\",\"datatype\":\"FP32\",\"shape\":[2,4],"
                    + "\"data\":[0,1,2,3,4,5,6,7]}]}");
            assertEquals(200, r.statusCode(), r.body());
            out = StubJson.MAPPER.readTree(r.body());
            assertEquals(List.of(1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0, 22.0), floats(output(out, "SUM")), r.body()); // 2x + (x+1)
            assertEquals(List.of(-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0), floats(output(out, "DIFF")), r.body()); // 2x - (x+1)

            JsonNode meta = StubJson.MAPPER.readTree(get(base + "/v2/models/ensemble").body());
            assertEquals("ensemble", meta.get("platform").asText(), meta.toString());
            JsonNode config = StubJson.MAPPER.readTree(get(base + "/v2/models/ensemble/config").body());
            assertEquals("ensemble", config.get("platform").asText(), config.toString());
            JsonNode steps = config.get("ensemble_scheduling").get("step");
            assertEquals("add_sub_2", steps.get(1).get("model_name").asText(), config.toString());
            assertEquals("temp_0", steps.get(1).get("input_map").get("INPUT0").asText(), config.toString());

            JsonNode stats = StubJson.MAPPER.readTree(get(base + "/v2/models/ensemble/stats").body());
            assertEquals(1, stats.get("model_stats").get(0).get("inference_stats").get("success").get("count").asLong(), stats.toString());

            List<String> series = get(metrics.endpoint()).body().lines()
                    .filter(l -> l.startsWith("backplane_inference_success_total") && l.contains("model=\"ensemble\",version=\"1\"")).toList();
            assertEquals(List.of("backplane_inference_success_total{model=\"ensemble\",version=\"1\"} 1.0"), series, "the ensemble's own series in /metrics");

            host.unload("add_sub_2");
            assertFalse(host.isModelReady("ensemble"), "an ensemble whose composing model is unloaded is not ready");
            assertTrue(get(base + "/v2/models/ensemble/ready").statusCode() != 200, "the ready probe of the ensemble says not ready");
            r = post(base + "/v2/models/ensemble/infer", "{\"inputs\":["
                    + "{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,2,3,4]},"
                    + "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,1,1,1]}]}");
            assertTrue(r.statusCode() != 200 && r.body().contains("step 1 (model 'add_sub_2')"), r.body());
        }
    }

    @Test
    void grpc_decoupledStepDrivesDownstreamPerResponse_andConfigCarriesTheSteps() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("square_negated").loadModel("ensemble").build();
                Frontend f = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            URI endpoint = URI.create(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(endpoint.getHost(), endpoint.getPort(), InsecureChannelCredentials.create()).build();
            try {
                var client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
                var async = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
                var config = client.modelConfig(ModelConfigRequest.newBuilder().setName("square_negated").build()).getConfig();
                assertEquals("ensemble", config.getPlatform());
                assertTrue(config.getModelTransactionPolicy().getDecoupled(), "an ensemble with a decoupled step is decoupled");
                assertEquals("negate", config.getEnsembleScheduling().getStep(1).getModelName());
                assertEquals("ensemble", client.modelMetadata(ModelMetadataRequest.newBuilder().setName("ensemble").build()).getPlatform());

                ModelInferResponse plain = client.modelInfer(ModelInferRequest.newBuilder().setModelName("ensemble")
                        .addInputs(fp32("INPUT0")).addInputs(fp32("INPUT1"))
                        .addRawInputContents(floats(1, 2, 3, 4)).addRawInputContents(floats(1, 1, 1, 1)).build());
                assertEquals(2, plain.getOutputsCount());

                LinkedBlockingQueue<ModelStreamInferResponse> streamed = new LinkedBlockingQueue<>();
                CompletableFuture<Void> closed = new CompletableFuture<>();
                StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(new StreamObserver<>() {
                    @Override
                    public void onNext(ModelStreamInferResponse value) {
                        streamed.add(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        closed.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                        closed.complete(null);
                    }
                });
                ByteBuffer three = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(3);
                requests.onNext(ModelInferRequest.newBuilder().setModelName("square_negated")
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN").setDatatype("INT32").addShape(1))
                        .addRawInputContents(ByteString.copyFrom(three.array())).build());
                List<Integer> values = new ArrayList<>();
                for (int i = 0; i < 3; i++) {
                    ModelStreamInferResponse s = streamed.poll(60, TimeUnit.SECONDS);
                    assertTrue(s != null && s.getErrorMessage().isEmpty(), String.valueOf(s));
                    values.add(s.getInferResponse().getRawOutputContents(0).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).getInt());
                }
                assertEquals(List.of(-9, -9, -9), values, "square sends n responses n*n, each negated by the next step");
                requests.onCompleted();
                closed.get(60, TimeUnit.SECONDS);
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }

    /**
     * Many concurrent requests to the Triton-shaped ensemble race random cancellation and the
     * unload/reload of a composing python model: each ends exactly once (one terminal call), the
     * host holds no request afterwards, and no stub or shared-memory file is left (after each test).
     */
    @Test
    void randomized_ensembleRequestsRaceCancelAndComposingReload_eachEndsOnce_nothingLeft() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.EXPLICIT)
                .unloadTimeout(Duration.ofSeconds(5)).loadModel("ensemble").build()) {
            int threads = 4;
            int atLeast = 10; // per thread, and more while the reloads go on (bounded by limit)
            int limit = 400;
            List<Terminals> all = java.util.Collections.synchronizedList(new ArrayList<>());
            java.util.concurrent.CountDownLatch gate = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.atomic.AtomicBoolean reloading = new java.util.concurrent.atomic.AtomicBoolean(true);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                workers.add(Thread.ofPlatform().start(() -> {
                    try {
                        gate.await();
                        java.util.concurrent.ThreadLocalRandom rnd = java.util.concurrent.ThreadLocalRandom.current();
                        for (int i = 0; i < limit && (i < atLeast || reloading.get()); i++) {
                            Terminals o = new Terminals();
                            all.add(o);
                            var h = host.stream(io.backplane.spi.InferenceRequest.builder("ensemble")
                                    .input(io.backplane.spi.Tensor.ofFloats("INPUT0", new long[] {4}, i, 2, 3, 4))
                                    .input(io.backplane.spi.Tensor.ofFloats("INPUT1", new long[] {4}, 1, 1, 1, 1)).build(), o);
                            if (rnd.nextInt(3) == 0) {
                                h.cancel();
                            }
                            if (rnd.nextBoolean()) {
                                o.end.get(60, TimeUnit.SECONDS); // some wait, some pile up: requests span the reloads
                            }
                        }
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                }));
            }
            Thread reloader = Thread.ofPlatform().start(() -> {
                try {
                    gate.await();
                    for (int i = 0; i < 3; i++) {
                        host.unload("add_sub_2");
                        host.load("add_sub_2");
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    reloading.set(false);
                }
            });
            gate.countDown();
            for (Thread w : workers) {
                w.join();
            }
            reloader.join();
            for (Terminals o : all) {
                o.end.get(60, TimeUnit.SECONDS);
                assertEquals(1, o.terminals.get(), "one terminal call per request");
                if (o.end.get() == null) {
                    assertEquals(1, o.responses.get(), "a request that succeeded has its one response");
                }
            }
            for (int i = 0; i < 4; i++) {
                Terminals o = new Terminals();
                host.stream(io.backplane.spi.InferenceRequest.builder("ensemble")
                        .input(io.backplane.spi.Tensor.ofFloats("INPUT0", new long[] {4}, i, 2, 3, 4))
                        .input(io.backplane.spi.Tensor.ofFloats("INPUT1", new long[] {4}, 1, 1, 1, 1)).build(), o);
                assertEquals(null, o.end.get(60, TimeUnit.SECONDS), "after the reloads the ensemble serves again");
            }
            Await.until(() -> host.openRequests() == 0, Duration.ofSeconds(30), "no request open");
            assertTrue(host.isModelReady("ensemble"), "the ensemble is ready again once add_sub_2 is back");
        }
    }

    /** Counts an observer's calls; {@code end} completes at the first terminal call (null: success). */
    private static final class Terminals implements io.backplane.spi.host.ResponseObserver {
        final java.util.concurrent.atomic.AtomicInteger terminals = new java.util.concurrent.atomic.AtomicInteger();
        final java.util.concurrent.atomic.AtomicInteger responses = new java.util.concurrent.atomic.AtomicInteger();
        final CompletableFuture<io.backplane.spi.BackplaneException> end = new CompletableFuture<>();

        @Override
        public void onResponse(io.backplane.spi.InferenceResponse response) {
            responses.incrementAndGet();
        }

        @Override
        public void onComplete() {
            terminals.incrementAndGet();
            end.complete(null);
        }

        @Override
        public void onError(io.backplane.spi.BackplaneException error) {
            terminals.incrementAndGet();
            end.complete(error);
        }
    }

    private static ModelInferRequest.InferInputTensor fp32(String name) {
        return ModelInferRequest.InferInputTensor.newBuilder().setName(name).setDatatype("FP32").addShape(4).build();
    }

    private static ByteString floats(float... v) {
        ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (float x : v) {
            b.putFloat(x);
        }
        return ByteString.copyFrom(b.array());
    }

    private static JsonNode output(JsonNode response, String name) {
        for (JsonNode o : response.get("outputs")) {
            if (o.get("name").asText().equals(name)) {
                return o;
            }
        }
        throw new AssertionError("no output " + name + " in " + response);
    }

    private static List<Double> floats(JsonNode output) {
        List<Double> out = new ArrayList<>();
        output.get("data").forEach(n -> out.add(n.asDouble()));
        return out;
    }

    private static HttpResponse<String> get(String url) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    private static HttpResponse<String> post(String url, String body) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }
}
