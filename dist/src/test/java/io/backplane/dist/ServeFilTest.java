package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import ml.dmlc.xgboost4j.java.Booster;
import ml.dmlc.xgboost4j.java.DMatrix;
import ml.dmlc.xgboost4j.java.XGBoost;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real server serves tree models from a Triton repository unchanged (backend "fil"): an XGBoost
 * classifier trained here with xgboost4j (xgboost_json, predict_proba, dynamic batching) and a
 * LightGBM regressor trained by LightGBM's Python package (the model environment of
 * tools/model-env.sh; that half skips, naming it, where it is missing). Their REST and gRPC outputs
 * equal the libraries' own predictions; and the natives the fil backend loads leave nothing in the
 * temporary folder, neither while it serves nor after it stopped (issue 36, pain point 1).
 */
@Timeout(300)
class ServeFilTest {
    private static final int FEATURES = 8;
    private static final Path DIST = ServeProcess.DIST;

    @TempDir
    Path dir;

    @Test
    void serve_xgboostAndLightgbm_restAndGrpcEqualTheLibraries_andLeaveNoNativeFile() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/fil")), "the layout has no fil backend");
        Path repo = Files.createDirectories(dir.resolve("repo"));
        Path tmp = Files.createDirectories(dir.resolve("tmp"));
        Booster xgb = train();
        try {
            write(repo, "trees_xgb", config("xgboost_json", 2, true, "dynamic_batching { }"), "xgboost.json", xgb.toByteArray("json"));
            Path lgb = trainLightgbm(dir.resolve("lightgbm"));
            List<String> models = new ArrayList<>(List.of("trees_xgb"));
            if (lgb != null) {
                write(repo, "trees_lgb", config("lightgbm", 1, false, ""), "model.txt", Files.readAllBytes(lgb.resolve("lgb_regression/model.txt")));
                models.add("trees_lgb");
            }
            try (ServeProcess s = ServeProcess.in(dir, "serve").repository(repo).frontends("http", "grpc").loadModels(models.toArray(String[]::new))
                    .args("--exit-timeout-secs", "3").env("JAVA_OPTS", "-Xmx512m -Djava.io.tmpdir=" + tmp).env("TMPDIR", tmp.toString()).start()) {
                s.awaitStarted(Duration.ofSeconds(120));
                float[] rest = rows(7, 5, false); // JSON has no NaN: REST rows are complete
                float[] grpc = rows(8, 6, true);
                assertArrayEquals(proba(predict(xgb, rest)), restInfer(s, "trees_xgb", rest), "REST trees_xgb");
                assertArrayEquals(proba(predict(xgb, grpc)), grpcInfer(s, "trees_xgb", grpc), "gRPC trees_xgb");
                if (lgb != null) {
                    float[] lgbRows = readFloats(lgb.resolve("rows.f32"));
                    double[] expected = readDoubles(lgb.resolve("lgb_regression/expected.f64"));
                    assertClose(expected, grpcInfer(s, "trees_lgb", lgbRows), "gRPC trees_lgb");
                    float[] complete = firstCompleteRows(lgbRows, expected);
                    double[] completeExpected = expectedOfComplete(lgbRows, expected);
                    assertClose(completeExpected, restInfer(s, "trees_lgb", complete), "REST trees_lgb");
                }
                assertEquals(List.of(), nativeFiles(tmp), "native libraries unpacked into the temporary folder while serving");
                s.signal("TERM", false);
                s.awaitExit();
                assertEquals(List.of(), nativeFiles(tmp), "native libraries left in the temporary folder after the server stopped");
            }
            if (lgb == null) {
                Assumptions.abort("XGBoost served and checked; the LightGBM half needs lightgbm in the model environment: run tools/model-env.sh");
            }
        } finally {
            xgb.dispose();
        }
    }

    private static List<String> nativeFiles(Path tmp) throws IOException {
        try (Stream<Path> all = Files.walk(tmp)) {
            return all.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith("libxgboost4j") || n.startsWith("lib_lightgbm") || n.startsWith("backplane-fil-")).toList();
        }
    }

    static String config(String type, int outputs, boolean classifier, String extra) {
        return """
                backend: "fil"
                max_batch_size: 256
                input [ { name: "input__0" data_type: TYPE_FP32 dims: [ %d ] } ]
                output [ { name: "output__0" data_type: TYPE_FP32 dims: [ %d ] } ]
                instance_group [ { kind: KIND_CPU } ]
                parameters [
                  { key: "model_type" value: { string_value: "%s" } },
                  { key: "output_class" value: { string_value: "%s" } },
                  { key: "predict_proba" value: { string_value: "%s" } }
                ]
                %s
                """.formatted(FEATURES, outputs, type, classifier, classifier, extra);
    }

    static void write(Path repo, String name, String config, String file, byte[] model) throws IOException {
        Files.writeString(Files.createDirectories(repo.resolve(name)).resolve("config.pbtxt"), config);
        Files.write(Files.createDirectories(repo.resolve(name).resolve("1")).resolve(file), model);
    }

    static float[] rows(long seed, int n, boolean missing) {
        SplittableRandom rnd = new SplittableRandom(seed);
        float[] x = new float[n * FEATURES];
        for (int i = 0; i < x.length; i++) {
            x[i] = missing && rnd.nextInt(8) == 0 ? Float.NaN : (float) rnd.nextGaussian();
        }
        return x;
    }

    static Booster train() throws Exception {
        int n = 300;
        float[] x = rows(42, n, true);
        float[] y = new float[n];
        for (int i = 0; i < n; i++) {
            float a = Float.isNaN(x[i * FEATURES]) ? 0 : x[i * FEATURES];
            float b = Float.isNaN(x[i * FEATURES + 1]) ? 0 : x[i * FEATURES + 1];
            y[i] = a - b > 0 ? 1 : 0;
        }
        DMatrix d = new DMatrix(x, n, FEATURES, Float.NaN);
        try {
            d.setLabel(y);
            Map<String, Object> params = new HashMap<>(Map.of("objective", "binary:logistic", "max_depth", 3, "eta", 0.3, "nthread", 1, "seed", 7));
            return XGBoost.train(d, params, 15, Map.of(), null, null);
        } finally {
            d.dispose();
        }
    }

    static float[] predict(Booster b, float[] rows) throws Exception {
        DMatrix d = new DMatrix(rows, rows.length / FEATURES, FEATURES, Float.NaN);
        try {
            float[][] p = b.predict(d);
            float[] out = new float[p.length];
            for (int i = 0; i < p.length; i++) {
                out[i] = p[i][0];
            }
            return out;
        } finally {
            d.dispose();
        }
    }

    static float[] proba(float[] p) {
        float[] out = new float[p.length * 2];
        for (int i = 0; i < p.length; i++) {
            out[2 * i] = 1f - p[i];
            out[2 * i + 1] = p[i];
        }
        return out;
    }

    /** LightGBM's models from backends/fil/src/test/python/train_lightgbm.py, or null where the model environment lacks lightgbm. */
    static Path trainLightgbm(Path out) throws Exception {
        Path python = ModelEnvironment.python();
        if (!Files.isExecutable(python)) {
            return null;
        }
        Path script = Path.of(System.getProperty("backplane.repo", "..")).resolve("backends/fil/src/test/python/train_lightgbm.py");
        Path log = Files.createDirectories(out).resolve("train.log");
        Process p = new ProcessBuilder(python.toString(), script.toString(), out.toString()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(5, TimeUnit.MINUTES)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("train_lightgbm.py did not finish in 5 minutes:\n" + Files.readString(log));
        }
        if (p.exitValue() != 0) {
            if (Files.readString(log).contains("lightgbm is missing")) {
                return null;
            }
            throw new AssertionError("train_lightgbm.py failed:\n" + Files.readString(log));
        }
        return out;
    }

    static float[] restInfer(ServeProcess s, String model, float[] rows) throws Exception {
        StringBuilder data = new StringBuilder();
        for (float v : rows) {
            data.append(data.isEmpty() ? "" : ",").append(v);
        }
        String body = "{\"inputs\":[{\"name\":\"input__0\",\"datatype\":\"FP32\",\"shape\":[" + rows.length / FEATURES + "," + FEATURES + "],\"data\":["
                + data + "]}]}";
        try (HttpClient client = HttpClient.newHttpClient()) {
            HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + s.port("http") + "/v2/models/" + model + "/infer"))
                    .timeout(Duration.ofSeconds(60)).POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            Matcher m = Pattern.compile("\"name\"\\s*:\\s*\"output__0\".*?\"data\"\\s*:\\s*\\[([^\\]]*)\\]", Pattern.DOTALL).matcher(r.body());
            assertTrue(m.find(), r.body());
            String[] parts = m.group(1).split(",");
            float[] out = new float[parts.length];
            for (int i = 0; i < parts.length; i++) {
                out[i] = Float.parseFloat(parts[i].strip());
            }
            return out;
        }
    }

    static float[] grpcInfer(ServeProcess s, String model, float[] rows) throws Exception {
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", s.port("grpc"), InsecureChannelCredentials.create()).build();
        try {
            ByteBuffer raw = ByteBuffer.allocate(rows.length * 4).order(ByteOrder.LITTLE_ENDIAN);
            for (float v : rows) {
                raw.putFloat(v);
            }
            raw.flip();
            ModelInferResponse r = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS)
                    .modelInfer(ModelInferRequest.newBuilder().setModelName(model).addInputs(ModelInferRequest.InferInputTensor.newBuilder()
                            .setName("input__0").setDatatype("FP32").addShape(rows.length / FEATURES).addShape(FEATURES)).addRawInputContents(ByteString.copyFrom(raw))
                            .build());
            assertEquals("output__0", r.getOutputs(0).getName());
            ByteBuffer out = r.getRawOutputContents(0).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
            float[] values = new float[out.remaining() / 4];
            out.asFloatBuffer().get(values);
            return values;
        } finally {
            channel.shutdownNow().awaitTermination(30, TimeUnit.SECONDS);
        }
    }

    static float[] readFloats(Path f) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(f)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[b.remaining() / 4];
        b.asFloatBuffer().get(out);
        return out;
    }

    static double[] readDoubles(Path f) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(f)).order(ByteOrder.LITTLE_ENDIAN);
        double[] out = new double[b.remaining() / 8];
        b.asDoubleBuffer().get(out);
        return out;
    }

    /** The rows without a missing value (JSON cannot carry NaN). */
    static float[] firstCompleteRows(float[] rows, double[] expected) {
        List<Integer> keep = complete(rows);
        float[] out = new float[keep.size() * FEATURES];
        for (int i = 0; i < keep.size(); i++) {
            System.arraycopy(rows, keep.get(i) * FEATURES, out, i * FEATURES, FEATURES);
        }
        return out;
    }

    static double[] expectedOfComplete(float[] rows, double[] expected) {
        return complete(rows).stream().mapToDouble(i -> expected[i]).toArray();
    }

    private static List<Integer> complete(float[] rows) {
        List<Integer> keep = new ArrayList<>();
        for (int r = 0; r < rows.length / FEATURES; r++) {
            boolean ok = true;
            for (int c = 0; c < FEATURES; c++) {
                ok &= !Float.isNaN(rows[r * FEATURES + c]);
            }
            if (ok) {
                keep.add(r);
            }
        }
        return keep;
    }

    static void assertClose(double[] expected, float[] got, String what) {
        assertEquals(expected.length, got.length, what + ": values");
        for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], got[i], 1e-6 * Math.max(1, Math.abs(expected[i])), what + ": value " + i);
        }
    }
}
