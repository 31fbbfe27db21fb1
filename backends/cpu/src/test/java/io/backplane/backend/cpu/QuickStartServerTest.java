package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelConfigRequest;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelInput;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Triton's quick-start repository (densenet_onnx, and inception_graphdef with its platform line
 * changed to ONNX Runtime) with tiny ONNX stand-ins for the weights
 * (src/test/python/generate_quickstart_models.py), served through the real REST and gRPC
 * frontends on ephemeral loopback ports: classification answers as Triton's image client reads
 * them, the config reports format and label_filename, and a warmed-up, cached copy of densenet
 * shows its warm-up, its cache hits in the statistics extension and the {@code nv_cache_*} metrics.
 */
@Timeout(120)
class QuickStartServerTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path temp;

    static Path quickstart() {
        try {
            return Path.of(QuickStartServerTest.class.getResource("/quickstart/densenet_onnx/config.pbtxt").toURI()).getParent().getParent();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private Path repository() throws IOException {
        Path repo = temp.resolve("repo");
        Path from = quickstart();
        try (Stream<Path> files = Files.walk(from)) {
            for (Path p : files.toList()) {
                Path to = repo.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(to);
                } else {
                    Files.copy(p, to, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
        // densenet again, warmed up and cached: the same model file, the config with two sections more
        Path cached = Files.createDirectories(repo.resolve("densenet_cached/1"));
        Files.copy(repo.resolve("densenet_onnx/1/model.onnx"), cached.resolve("model.onnx"));
        Files.copy(repo.resolve("densenet_onnx/densenet_labels.txt"), cached.resolveSibling("densenet_labels.txt"));
        Files.write(Files.createDirectories(repo.resolve("densenet_cached/warmup")).resolve("red.bin"), channelImage(3, 224 * 224, 0, 1f));
        Files.writeString(repo.resolve("densenet_cached/config.pbtxt"), Files.readString(repo.resolve("densenet_onnx/config.pbtxt"))
                .replace("densenet_onnx", "densenet_cached") + """
                model_warmup [
                  { name: "zeros" batch_size: 1 inputs { key: "data_0" value: { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } } },
                  { name: "red" batch_size: 1 count: 2
                    inputs { key: "data_0" value: { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] input_data_file: "red.bin" } } }
                ]
                response_cache { enable: true }
                """);
        return repo;
    }

    /** {@code channels} planes of {@code plane} floats, plane {@code hot} filled with {@code value}, little-endian. */
    private static byte[] channelImage(int channels, int plane, int hot, float value) {
        ByteBuffer b = ByteBuffer.allocate(channels * plane * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int c = 0; c < channels; c++) {
            for (int i = 0; i < plane; i++) {
                b.putFloat(c == hot ? value : 0f);
            }
        }
        return b.array();
    }

    /** An NHWC image of {@code pixels} pixels whose channel {@code hot} is {@code value}. */
    private static byte[] nhwcImage(int pixels, int hot, float value) {
        ByteBuffer b = ByteBuffer.allocate(pixels * 3 * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < pixels; i++) {
            for (int c = 0; c < 3; c++) {
                b.putFloat(c == hot ? value : 0f);
            }
        }
        return b.array();
    }

    private record Served(BackplaneHost host, List<Frontend> frontends, String http, String grpc, String metrics) implements AutoCloseable {
        @Override
        public void close() {
            try {
                for (Frontend f : frontends.reversed()) {
                    f.close();
                }
            } catch (Exception e) {
                throw new IllegalStateException("a frontend failed to close", e);
            } finally {
                host.close();
            }
        }
    }

    private Served serve() throws Exception {
        BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.NONE).responseCache(64L << 20)
                .build();
        List<Frontend> started = new ArrayList<>();
        try {
            List<String> endpoints = new ArrayList<>();
            for (String name : List.of("http", "grpc", "metrics")) {
                Frontend f = host.frontendFactories().get(name).create(context(host, Map.of("host", "127.0.0.1", "port", "0")));
                started.add(f);
                f.start();
                endpoints.add(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            }
            return new Served(host, started, endpoints.get(0), endpoints.get(1), endpoints.get(2));
        } catch (Exception e) {
            for (Frontend f : started.reversed()) {
                try {
                    f.close();
                } catch (Exception suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            host.close();
            throw e;
        }
    }

    private static String base(String endpoint) {
        URI u = URI.create(endpoint);
        return "http://" + u.getHost() + ":" + u.getPort();
    }

    private static HttpResponse<String> post(HttpClient client, String url, String body) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60)).POST(HttpRequest.BodyPublishers.ofString(body))
                .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
    }

    private static HttpResponse<String> get(HttpClient client, String url) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    /** A REST infer body with FP32 {@code data} of {@code shape} and one output requested with a classification count. */
    private static String restBody(String input, long[] shape, byte[] data, String output, Object classes) {
        ObjectNode root = JSON.createObjectNode();
        ObjectNode in = root.putArray("inputs").addObject().put("name", input).put("datatype", "FP32");
        ArrayNode s = in.putArray("shape");
        for (long d : shape) {
            s.add(d);
        }
        ArrayNode values = in.putArray("data");
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        while (b.hasRemaining()) {
            values.add(b.getFloat());
        }
        ObjectNode out = root.putArray("outputs").addObject().put("name", output);
        out.putObject("parameters").putPOJO("classification", classes);
        return root.toString();
    }

    private static List<String> strings(JsonNode output) {
        List<String> out = new ArrayList<>();
        output.get("data").forEach(n -> out.add(n.asText()));
        return out;
    }

    private static ModelInferRequest grpcRequest(String model, String input, long[] shape, byte[] data, String output, long classes) {
        ModelInferRequest.InferInputTensor.Builder in = ModelInferRequest.InferInputTensor.newBuilder().setName(input).setDatatype("FP32");
        for (long d : shape) {
            in.addShape(d);
        }
        return ModelInferRequest.newBuilder().setModelName(model).addInputs(in).addRawInputContents(ByteString.copyFrom(data))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName(output)
                        .putParameters("classification", InferParameter.newBuilder().setInt64Param(classes).build()))
                .build();
    }

    /** The BYTES elements of a gRPC raw output: 4-byte little-endian length, then the bytes. */
    private static List<String> rawStrings(ByteString raw) {
        ByteBuffer b = raw.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        List<String> out = new ArrayList<>();
        while (b.hasRemaining()) {
            byte[] s = new byte[b.getInt()];
            b.get(s);
            out.add(new String(s, java.nio.charset.StandardCharsets.UTF_8));
        }
        return out;
    }

    @Test
    void quickStartModels_classifyOverRestAndGrpc_asTritonsImageClientReadsThem() throws Exception {
        try (Served s = serve(); HttpClient client = HttpClient.newHttpClient()) {
            String http = base(s.http());
            // densenet: a blue image (channel 2) lands on class 500
            byte[] blue = channelImage(3, 224 * 224, 2, 1f);
            HttpResponse<String> r = post(client, http + "/v2/models/densenet_onnx/infer", restBody("data_0", new long[] {3, 224, 224}, blue, "fc6_1", 3));
            assertEquals(200, r.statusCode(), r.body());
            JsonNode out = JSON.readTree(r.body()).get("outputs").get(0);
            assertEquals("BYTES", out.get("datatype").asText());
            assertEquals("[3]", out.get("shape").toString());
            assertEquals(List.of("1.000000:500:DENSENET CLASS 500", "0.000000:0:DENSENET CLASS 0", "0.000000:1:DENSENET CLASS 1"), strings(out));

            // inception batches: one answer row per batch item
            byte[] batch = new byte[2 * 299 * 299 * 3 * 4];
            System.arraycopy(nhwcImage(299 * 299, 1, 1f), 0, batch, 0, batch.length / 2);
            System.arraycopy(nhwcImage(299 * 299, 0, 2f), 0, batch, batch.length / 2, batch.length / 2);
            r = post(client, http + "/v2/models/inception_graphdef/infer", restBody("input", new long[] {2, 299, 299, 3}, batch,
                    "InceptionV3/Predictions/Softmax", 1));
            assertEquals(200, r.statusCode(), r.body());
            out = JSON.readTree(r.body()).get("outputs").get(0);
            assertEquals("[2,1]", out.get("shape").toString());
            assertEquals(List.of("0.002711:20:INCEPTION CLASS 20", "0.007335:10:INCEPTION CLASS 10"), strings(out));

            r = post(client, http + "/v2/models/densenet_onnx/infer", restBody("data_0", new long[] {3, 224, 224}, blue, "fc6_1", 0));
            assertEquals(400, r.statusCode());
            assertTrue(r.body().contains("classification count 0 must be ≥ 1"), r.body());
            r = post(client, http + "/v2/models/densenet_onnx/infer", restBody("data_0", new long[] {3, 224, 224}, blue, "fc6_1", "three"));
            assertEquals(400, r.statusCode());
            assertTrue(r.body().contains("output 'fc6_1' classification must be an integer"), r.body());

            JsonNode config = JSON.readTree(get(client, http + "/v2/models/densenet_onnx/config").body());
            assertEquals("FORMAT_NCHW", config.get("input").get(0).get("format").asText());
            assertEquals("densenet_labels.txt", config.get("output").get(0).get("label_filename").asText());
            assertTrue(JSON.readTree(get(client, http + "/v2").body()).get("extensions").toString().contains("\"classification\""));

            URI g = URI.create(s.grpc());
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(g.getHost(), g.getPort(), InsecureChannelCredentials.create()).build();
            try {
                var stub = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
                ModelInferResponse resp = stub.modelInfer(grpcRequest("densenet_onnx", "data_0", new long[] {3, 224, 224},
                        channelImage(3, 224 * 224, 0, 0.5f), "fc6_1", 2));
                assertEquals("BYTES", resp.getOutputs(0).getDatatype());
                assertEquals(List.of(2L), resp.getOutputs(0).getShapeList());
                assertEquals(List.of("0.500000:100:DENSENET CLASS 100", "0.000000:0:DENSENET CLASS 0"), rawStrings(resp.getRawOutputContents(0)));

                StatusRuntimeException bad = assertThrows(StatusRuntimeException.class, () -> stub.modelInfer(grpcRequest("densenet_onnx", "data_0",
                        new long[] {3, 224, 224}, blue, "fc6_1", -1)));
                assertEquals(Status.Code.INVALID_ARGUMENT, bad.getStatus().getCode());
                assertTrue(bad.getStatus().getDescription().contains("classification count -1 must be ≥ 1"), bad.getStatus().getDescription());

                var config2 = stub.modelConfig(ModelConfigRequest.newBuilder().setName("inception_graphdef").build()).getConfig();
                assertEquals(ModelInput.Format.FORMAT_NHWC, config2.getInput(0).getFormat());
                assertEquals("inception_labels.txt", config2.getOutput(0).getLabelFilename());
                assertTrue(stub.serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList().contains("classification"));
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void warmedUpCachedModel_warmupRanBeforeReady_repeatsAreCacheHits_inStatisticsAndMetrics() throws Exception {
        try (Served s = serve(); HttpClient client = HttpClient.newHttpClient()) {
            String http = base(s.http());
            JsonNode before = JSON.readTree(get(client, http + "/v2/models/densenet_cached/stats").body()).get("model_stats").get(0);
            // The three warm-up requests (zeros, red twice) ran before the model was ready (a failing one fails the load), but
            // nothing of a warm-up reaches statistics, metrics or the response cache (issue 27): the first green is a miss.
            assertEquals(0, before.get("execution_count").asLong(), "warm-up requests are not counted");

            byte[] green = channelImage(3, 224 * 224, 1, 0.25f);
            String body = restBody("data_0", new long[] {3, 224, 224}, green, "fc6_1", 1);
            for (int i = 0; i < 3; i++) {
                HttpResponse<String> r = post(client, http + "/v2/models/densenet_cached/infer", body);
                assertEquals(200, r.statusCode(), r.body());
                assertEquals(List.of("0.250000:300:DENSENET CLASS 300"), strings(JSON.readTree(r.body()).get("outputs").get(0)));
            }

            JsonNode stats = JSON.readTree(get(client, http + "/v2/models/densenet_cached/stats").body()).get("model_stats").get(0);
            assertEquals(1, stats.get("execution_count").asLong(), "one execution for three identical requests");
            JsonNode inference = stats.get("inference_stats");
            assertEquals(2, inference.get("cache_hit").get("count").asLong(), inference.toString());
            assertTrue(inference.get("cache_miss").get("count").asLong() >= 1, inference.toString());

            assertTrue(JSON.readTree(get(client, http + "/v2/models/densenet_cached/config").body()).get("response_cache").get("enable").asBoolean());
            String metrics = get(client, s.metrics()).body();
            assertTrue(metrics.contains("nv_cache_num_hits_per_model{model=\"densenet_cached\",version=\"1\"} 2"), metrics);
            assertTrue(metrics.contains("nv_cache_num_misses_per_model{model=\"densenet_cached\",version=\"1\"}"), metrics);
            assertTrue(metrics.contains("nv_cache_num_hits_per_model{model=\"densenet_onnx\",version=\"1\"} 0"), metrics);
        }
    }

    private static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }
}
