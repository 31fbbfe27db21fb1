package io.backplane.backend.python;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A BLS hop beside a direct call of the same model, in one run (JUnit-free): from a python model
 * ({@code bls_bench}, timed inside Python) to (a) a python identity model and (b) an ONNX identity
 * model, with 4 FP32 values and with 1 MiB; the same model called embedded ({@code host.infer})
 * and over REST (the binary tensor extension, loopback). Reports p50/mean/p99 and the ratios,
 * and the load average. Run with
 * {@code ./mvnw -q -B -pl backends/python -am -Pbls-bench -DskipTests verify}.
 */
public final class BlsBenchmark {
    private BlsBenchmark() {
    }

    private static final String IDENTITY = """
            name: "identity"
            backend: "python"
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """;
    private static final String ONNX_IDENTITY = """
            name: "onnx_identity"
            backend: "onnxruntime"
            max_batch_size: 4
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """;
    private static final String BENCH = """
            name: "bls_bench"
            backend: "python"
            input [ { name: "TARGET" data_type: TYPE_STRING dims: [ 1 ] }, { name: "N" data_type: TYPE_INT32 dims: [ 1 ] },
                    { name: "SIZE" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "STATS" data_type: TYPE_FP64 dims: [ 3 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            """;

    @SuppressWarnings("SystemOut")
    public static void main(String[] args) throws Exception {
        BlsRepository.requirePython();
        Path root = Files.createTempDirectory("bls-bench");
        Path repo = Files.createDirectories(root.resolve("repo"));
        write(repo, "identity", IDENTITY, BlsRepository.MODELS.resolve("identity/1/model.py"), "model.py");
        write(repo, "bls_bench", BENCH, BlsRepository.MODELS.resolve("bls_bench/1/model.py"), "model.py");
        write(repo, "onnx_identity", ONNX_IDENTITY, Path.of("../cpu/src/test/resources/models/identity_fp32/1/model.onnx"), "model.onnx");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).build()) {
            Frontend http = host.frontendFactories().get("http").create(new FrontendContext() {
                @Override
                public InferenceService service() {
                    return host;
                }

                @Override
                public Map<String, String> options() {
                    return Map.of("host", "127.0.0.1", "port", "0");
                }
            });
            http.start();
            try (HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
                System.out.println("BLS hop vs direct call of the same model (microseconds; p50 / mean / p99)");
                for (String target : new String[] {"identity", "onnx_identity"}) {
                    for (int size : new int[] {4, 262_144}) {
                        int n = size == 4 ? 3000 : 300;
                        double[] bls = bls(host, target, size, n);
                        double[] embedded = embedded(host, target, size, n);
                        double[] rest = rest(client, http.endpoint(), target, size, n);
                        System.out.printf(Locale.ROOT, "%-14s %-8s BLS %s | embedded %s | REST %s | BLS/embedded %.2f  BLS/REST %.2f%n", target,
                                size == 4 ? "4xFP32" : "1 MiB", fmt(bls), fmt(embedded), fmt(rest), bls[0] / embedded[0], bls[0] / rest[0]);
                    }
                }
            } finally {
                http.close();
            }
        }
        System.out.println("load average: " + Files.readString(Path.of("/proc/loadavg")).trim() + " (" + Runtime.getRuntime().availableProcessors()
                + " cores)");
        try (var s = Files.walk(root)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    private static void write(Path repo, String name, String config, Path file, String as) throws Exception {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.copy(file, dir.resolve(as));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), config);
    }

    private static String fmt(double[] s) {
        return String.format(Locale.ROOT, "%7.1f / %7.1f / %7.1f", s[0], s[1], s[2]);
    }

    private static long[] shape(String target, int size) {
        return target.startsWith("onnx") ? new long[] {1, size} : new long[] {size};
    }

    private static double[] bls(BackplaneHost host, String target, int size, int n) throws Exception {
        InferenceResponse r = host.infer(InferenceRequest.builder("bls_bench").input(Tensor.ofStrings("TARGET", new long[] {1}, target))
                .input(Tensor.ofInts("N", new long[] {1}, n)).input(Tensor.ofInts("SIZE", new long[] {1}, size)).build()).get(10, TimeUnit.MINUTES);
        return r.output("STATS").toDoubleArray();
    }

    private static double[] embedded(BackplaneHost host, String target, int size, int n) throws Exception {
        float[] data = new float[size];
        Arrays.fill(data, 1.5f);
        long[] t = new long[n];
        for (int i = -n / 10; i < n; i++) {
            InferenceRequest req = InferenceRequest.builder(target).input(Tensor.ofFloats("INPUT0", shape(target, size), data)).build();
            long t0 = System.nanoTime();
            InferenceResponse r = host.infer(req).get(1, TimeUnit.MINUTES);
            long t1 = System.nanoTime();
            if (r.output("OUTPUT0").byteSize() != size * 4L) {
                throw new IllegalStateException("bad response " + r);
            }
            if (i >= 0) {
                t[i] = t1 - t0;
            }
        }
        return stats(t);
    }

    private static double[] rest(HttpClient client, String endpoint, String target, int size, int n) throws Exception {
        long[] shape = shape(target, size);
        String header = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":" + Arrays.toString(shape).replace(" ", "") + ",\"datatype\":\"FP32\","
                + "\"parameters\":{\"binary_data_size\":" + size * 4 + "}}],\"outputs\":[{\"name\":\"OUTPUT0\",\"parameters\":{\"binary_data\":true}}]}";
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer data = ByteBuffer.allocate(size * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < size; i++) {
            data.putFloat(1.5f);
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.write(h);
        body.write(data.array());
        byte[] bytes = body.toByteArray();
        URI uri = URI.create(endpoint + "/v2/models/" + target + "/infer");
        long[] t = new long[n];
        for (int i = -n / 10; i < n; i++) {
            HttpRequest req = HttpRequest.newBuilder(uri).header("Inference-Header-Content-Length", Integer.toString(h.length))
                    .header("Content-Type", "application/octet-stream").POST(HttpRequest.BodyPublishers.ofByteArray(bytes)).build();
            long t0 = System.nanoTime();
            HttpResponse<byte[]> r = client.send(req, HttpResponse.BodyHandlers.ofByteArray());
            long t1 = System.nanoTime();
            if (r.statusCode() != 200 || r.body().length < size * 4) {
                throw new IllegalStateException("REST " + r.statusCode() + ": " + new String(r.body(), 0, Math.min(300, r.body().length), StandardCharsets.UTF_8));
            }
            if (i >= 0) {
                t[i] = t1 - t0;
            }
        }
        return stats(t);
    }

    private static double[] stats(long[] t) {
        long[] s = t.clone();
        Arrays.sort(s);
        double mean = Arrays.stream(s).average().orElse(0) / 1e3;
        return new double[] {s[s.length / 2] / 1e3, mean, s[s.length * 99 / 100] / 1e3};
    }
}
