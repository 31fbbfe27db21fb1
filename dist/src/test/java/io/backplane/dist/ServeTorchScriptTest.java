package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.testkit.ModelEnvironment;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36: a Triton repository with TorchScript models loads unchanged in the real server
 * ({@code bin/backplane serve}, the pytorch backend from {@code backends/pytorch/}), and its REST
 * and gRPC answers equal {@code torch.jit.load(model.pt)(...)}. The models are traced at test time
 * by the pytorch backend's own {@code make_models.py} with the model environment's torch (skipped,
 * naming {@code tools/model-env.sh}, where it is missing), never committed: a small conv net with
 * dynamic batching (three rows in one request) and a model with three outputs (one INT64) bound by
 * Triton's {@code name__index} rule. The server runs with {@code java.io.tmpdir} (and
 * {@code TMPDIR}) set to a folder of the test's own, which is empty again after a SIGTERM stop, and
 * no {@code jna*}, {@code djl*} or {@code *torch*} entry appears in {@code /tmp} meanwhile (issue 36,
 * pain point 1: plugins' temporary files left behind).
 */
@Timeout(600)
class ServeTorchScriptTest {
    private static final Path DIST = ServeProcess.DIST;
    private static final Path REPO = Path.of(System.getProperty("backplane.repo", "..")).toAbsolutePath().normalize();
    private static final Pattern NATIVE_TEMP = Pattern.compile("(?i).*(jna|djl|torch).*");
    private static final float EPS = 1e-5f;
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    /** One tensor make_models.py wrote: torch's dtype name, shape and raw little-endian bytes. */
    record Saved(String dtype, long[] shape, byte[] bytes) {
        String datatype() {
            return switch (dtype) {
                case "float32" -> "FP32";
                case "int64" -> "INT64";
                default -> throw new IllegalArgumentException("make_models.py wrote dtype " + dtype + "; add it to Saved.datatype()");
            };
        }

        float[] floats() {
            float[] f = new float[bytes.length / 4];
            ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(f);
            return f;
        }

        long[] longs() {
            long[] l = new long[bytes.length / 8];
            ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(l);
            return l;
        }
    }

    /** Traces the models into dir/made with the model environment's torch; skips where it is missing. */
    static Path makeModels(Path dir) throws Exception {
        Path envDir = ModelEnvironment.directory();
        Path python = envDir.resolve("bin/python");
        Assumptions.assumeTrue(Files.isExecutable(python), "no model environment at " + envDir + " (torch); run tools/model-env.sh to make it");
        Path script = REPO.resolve("backends/torch/src/test/resources/torch/make_models.py");
        Path out = dir.resolve("made");
        Path log = dir.resolve("make_models.log");
        Process p = new ProcessBuilder(python.toString(), script.toString(), out.toString()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("make_models.py did not finish in 300 s; see " + log);
        }
        String text = Files.readString(log, StandardCharsets.UTF_8);
        Assumptions.assumeFalse(p.exitValue() != 0 && text.contains("No module named"),
                "the model environment " + envDir + " has no torch; run tools/model-env.sh:\n" + text);
        assertEquals(0, p.exitValue(), "make_models.py failed:\n" + text);
        return out;
    }

    static void model(Path repo, Path made, String name, String config) throws IOException {
        Path d = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.copy(made.resolve(name).resolve("model.pt"), d.resolve("model.pt"));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), "name: \"" + name + "\"\n" + config);
    }

    static Map<String, Saved> tensors(Path made, String model) throws IOException {
        Path d = made.resolve(model);
        Map<String, Saved> out = new LinkedHashMap<>();
        for (String line : Files.readAllLines(d.resolve("shapes.txt"))) {
            String[] f = line.split(" ", -1);
            long[] shape = f.length < 3 || f[2].isEmpty() ? new long[0] : Arrays.stream(f[2].split(",")).mapToLong(Long::parseLong).toArray();
            out.put(f[0], new Saved(f[1], shape, Files.readAllBytes(d.resolve(f[0] + ".bin"))));
        }
        return out;
    }

    @Test
    void serve_tracedTorchScriptModels_restAndGrpcEqualTorch_leavesNoTemporaryFiles() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/pytorch")), "the layout has no pytorch backend (backends/pytorch/)");
        Path made = makeModels(dir);
        Path repo = dir.resolve("repo");
        model(repo, made, "tiny_conv", """
                platform: "pytorch_libtorch"
                max_batch_size: 8
                input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]
                output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 5 ] } ]
                dynamic_batching { max_queue_delay_microseconds: 2000 }
                """);
        model(repo, made, "tuple_out", """
                backend: "pytorch"
                max_batch_size: 0
                input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2, 3, 4 ] } ]
                output [ { name: "argmax__2" data_type: TYPE_INT64 dims: [ 2, 3 ] },
                         { name: "sum__0" data_type: TYPE_FP32 dims: [ 2, 4 ] },
                         { name: "transposed__1" data_type: TYPE_FP32 dims: [ 2, 4, 3 ] } ]
                """);
        Map<String, Saved> conv = tensors(made, "tiny_conv");
        Map<String, Saved> tuple = tensors(made, "tuple_out");
        Path tmp = Files.createDirectories(dir.resolve("tmp"));
        Set<String> systemTmpBefore = nativeTempEntries();

        try (ServeProcess s = ServeProcess.in(dir, "serve").repository(repo).frontends("http", "grpc").loadModels("tiny_conv", "tuple_out")
                .args("--exit-timeout-secs", "3").env("JAVA_OPTS", "-Xmx512m -Djava.io.tmpdir=" + tmp).env("TMPDIR", tmp.toString()).start()) {
            s.awaitStarted(Duration.ofSeconds(240));
            assertTrue(s.output().contains("backend 'pytorch'"), "the pytorch backend from backends/pytorch/ is loaded:\n" + s.output());

            // REST (JSON)
            try (HttpClient http = HttpClient.newHttpClient()) {
                String base = "http://127.0.0.1:" + s.port("http") + "/v2/models/";
                JsonNode a = rest(http, base + "tiny_conv/infer", "INPUT__0", conv.get("in_0"));
                assertOutput(a, "OUTPUT__0", conv.get("out_0"), s);
                JsonNode b = rest(http, base + "tuple_out/infer", "INPUT__0", tuple.get("in_0"));
                assertOutput(b, "sum__0", tuple.get("out_0"), s);
                assertOutput(b, "transposed__1", tuple.get("out_1"), s);
                assertOutput(b, "argmax__2", tuple.get("out_2"), s);
            }

            // gRPC (raw contents)
            ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", s.port("grpc"), InsecureChannelCredentials.create()).build();
            try {
                var grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS);
                ModelInferResponse a = grpc.modelInfer(grpcRequest("tiny_conv", "INPUT__0", conv.get("in_0")));
                assertOutput(a, "OUTPUT__0", conv.get("out_0"));
                ModelInferResponse b = grpc.modelInfer(grpcRequest("tuple_out", "INPUT__0", tuple.get("in_0")));
                assertOutput(b, "sum__0", tuple.get("out_0"));
                assertOutput(b, "transposed__1", tuple.get("out_1"));
                assertOutput(b, "argmax__2", tuple.get("out_2"));
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }

            s.signal("TERM", false);
            assertEquals(0, s.awaitExit(), s.output());
            assertTrue(s.output().contains("stopped in "), "a clean stop:\n" + s.output());
        }
        assertEquals(List.of(), names(tmp), "left in the server's java.io.tmpdir (" + tmp + ") after SIGTERM");
        Set<String> appeared = new TreeSet<>(nativeTempEntries());
        appeared.removeAll(systemTmpBefore);
        assertEquals(Set.of(), appeared, "new jna/djl/torch entries in /tmp while the server ran (java.io.tmpdir and TMPDIR were " + tmp + ")");
    }

    static JsonNode rest(HttpClient http, String url, String input, Saved t) throws Exception {
        ObjectNode body = JSON.createObjectNode();
        ObjectNode in = body.putArray("inputs").addObject();
        in.put("name", input).put("datatype", t.datatype());
        ArrayNode shape = in.putArray("shape");
        Arrays.stream(t.shape()).forEach(shape::add);
        ArrayNode data = in.putArray("data");
        if (t.datatype().equals("FP32")) {
            for (float f : t.floats()) {
                data.add(f);
            }
        } else {
            Arrays.stream(t.longs()).forEach(data::add);
        }
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(120))
                .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body))).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), url + ": " + r.body());
        return JSON.readTree(r.body());
    }

    static void assertOutput(JsonNode response, String name, Saved want, ServeProcess s) {
        for (JsonNode o : response.get("outputs")) {
            if (!o.get("name").asText().equals(name)) {
                continue;
            }
            assertEquals(want.datatype(), o.get("datatype").asText(), name);
            long[] shape = new long[o.get("shape").size()];
            for (int i = 0; i < shape.length; i++) {
                shape[i] = o.get("shape").get(i).asLong();
            }
            assertArrayEquals(want.shape(), shape, "REST " + name + " shape");
            JsonNode data = o.get("data");
            if (want.datatype().equals("FP32")) {
                float[] got = new float[data.size()];
                for (int i = 0; i < got.length; i++) {
                    got[i] = (float) data.get(i).asDouble();
                }
                assertArrayEquals(want.floats(), got, EPS, "REST " + name + " equals torch.jit.load(...)(...)");
            } else {
                long[] got = new long[data.size()];
                for (int i = 0; i < got.length; i++) {
                    got[i] = data.get(i).asLong();
                }
                assertArrayEquals(want.longs(), got, "REST " + name + " equals torch.jit.load(...)(...)");
            }
            return;
        }
        throw new AssertionError("no output " + name + " in " + response + "\n" + s.output());
    }

    static ModelInferRequest grpcRequest(String model, String input, Saved t) {
        ModelInferRequest.InferInputTensor.Builder in = ModelInferRequest.InferInputTensor.newBuilder().setName(input).setDatatype(t.datatype());
        Arrays.stream(t.shape()).forEach(in::addShape);
        return ModelInferRequest.newBuilder().setModelName(model).addInputs(in).addRawInputContents(ByteString.copyFrom(t.bytes())).build();
    }

    static void assertOutput(ModelInferResponse response, String name, Saved want) {
        for (int i = 0; i < response.getOutputsCount(); i++) {
            ModelInferResponse.InferOutputTensor o = response.getOutputs(i);
            if (!o.getName().equals(name)) {
                continue;
            }
            assertEquals(want.datatype(), o.getDatatype(), name);
            assertArrayEquals(want.shape(), o.getShapeList().stream().mapToLong(Long::longValue).toArray(), "gRPC " + name + " shape");
            Saved got;
            if (response.getRawOutputContentsCount() > 0) {
                got = new Saved(want.dtype(), want.shape(), response.getRawOutputContents(i).toByteArray());
            } else if (want.datatype().equals("FP32")) {
                ByteBuffer b = ByteBuffer.allocate(o.getContents().getFp32ContentsCount() * 4).order(ByteOrder.LITTLE_ENDIAN);
                o.getContents().getFp32ContentsList().forEach(b::putFloat);
                got = new Saved(want.dtype(), want.shape(), b.array());
            } else {
                ByteBuffer b = ByteBuffer.allocate(o.getContents().getInt64ContentsCount() * 8).order(ByteOrder.LITTLE_ENDIAN);
                o.getContents().getInt64ContentsList().forEach(b::putLong);
                got = new Saved(want.dtype(), want.shape(), b.array());
            }
            if (want.datatype().equals("FP32")) {
                assertArrayEquals(want.floats(), got.floats(), EPS, "gRPC " + name + " equals torch.jit.load(...)(...)");
            } else {
                assertArrayEquals(want.longs(), got.longs(), "gRPC " + name + " equals torch.jit.load(...)(...)");
            }
            return;
        }
        throw new AssertionError("no output " + name + " in " + response);
    }

    /** The entries of /tmp whose names say jna, djl or torch (what libtorch's and JNA's loaders would leave). */
    private static Set<String> nativeTempEntries() throws IOException {
        try (Stream<Path> f = Files.list(Path.of("/tmp"))) {
            return new TreeSet<>(f.map(p -> p.getFileName().toString()).filter(n -> NATIVE_TEMP.matcher(n).matches()).toList());
        }
    }

    private static List<String> names(Path d) throws IOException {
        try (Stream<Path> f = Files.list(d)) {
            return new ArrayList<>(f.map(p -> p.getFileName().toString()).sorted().toList());
        }
    }
}
