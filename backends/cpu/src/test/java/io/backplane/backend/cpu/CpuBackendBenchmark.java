package io.backplane.backend.cpu;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.OrtSession.SessionOptions;
import io.backplane.core.BackplaneHost;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.ModelHarness;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Throughput and latency at batch 1, 8 and 32 of two models — bench/mlp (64 -> 256 -> 64, FP32:
 * a few microseconds of compute, so overhead shows at its largest) and bench/mlp_large (512 ->
 * 2048 -> 512: a realistic small model) — along three paths in the same run:
 * <ul>
 *   <li>{@code ort-direct}: ONNX Runtime's Java API on the same file with the same session
 *       options: one tensor of B rows from a float[], run, output copied out;
 *   <li>{@code host}: {@link BackplaneHost#infer} with one request of B rows (repository, queue,
 *       scheduler, sender, backend), waiting for the future;
 *   <li>{@code host-cr}: the same through a host built with {@code callerRuns(true)}, which runs the
 *       model on the calling thread when an instance is idle (no thread hand-off);
 *   <li>{@code backend}: B requests of one row each, which the core hands to the backend as one
 *       batch ({@code ModelHarness.batch}, as the dynamic batcher would when B are queued):
 *       validation, concatenation, one ORT run, split per request.
 * </ul>
 * One caller thread, one intra-op thread per session; the paths alternate call by call so that
 * load from other processes hits all alike. Overheads are against {@code ort-direct}.
 *
 * <p>Run (see docs/backends/cpu.md):
 * <pre>
 * ./mvnw -q -B -pl backends/cpu -am test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp backends/cpu/target/test-classes:backends/cpu/target/classes:$(cat backends/cpu/target/cp.txt) \
 *     io.backplane.backend.cpu.CpuBackendBenchmark [seconds-per-measurement, default 3]
 * </pre>
 */
public final class CpuBackendBenchmark {
    private static final Logger LOG = LoggerFactory.getLogger(CpuBackendBenchmark.class);

    private CpuBackendBenchmark() {
    }

    interface Runner {
        void runBatch() throws Exception;
    }

    /** Per-call samples of one path. */
    static final class Samples {
        final List<Long> nanos = new ArrayList<>();
        long total;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3.0;
        OrtEnvironment env = Ort.environment();
        List<String> report = new ArrayList<>();
        report.add(String.format(Locale.ROOT, "%-10s %-6s %-10s %12s %10s %10s %10s %10s", "model", "batch", "path", "rows/s", "p10 us", "p50 us",
                "p99 us", "overhead"));
        Path repo = Files.createTempDirectory("cpu-bench");
        try {
            for (String name : List.of("mlp", "mlp_large")) {
                Path to = Files.createDirectories(repo.resolve(name).resolve("1"));
                Path from = TestModels.repository().resolveSibling("bench").resolve(name);
                Files.copy(from.resolve("1/model.onnx"), to.resolve("model.onnx"));
                Files.writeString(repo.resolve(name).resolve("config.pbtxt"), Files.readString(from.resolve("config.pbtxt"))
                        .replace("dynamic_batching { }\n", "")); // one request of B rows: no batcher needed
            }
            try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("mlp").loadModel("mlp_large").build();
                    BackplaneHost callerRuns = BackplaneHost.builder().modelRepository(repo).loadModel("mlp").loadModel("mlp_large")
                            .callerRuns(true).build()) {
                run(host, callerRuns, env, "mlp", 64, seconds, report);
                run(host, callerRuns, env, "mlp_large", 512, seconds, report);
            }
        } finally {
            try (var s = Files.walk(repo)) {
                for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
        LOG.info("cpu backend benchmark, ORT {}, {} cpus, {} s per measurement, load average {}:\n{}", env.getVersion(),
                Runtime.getRuntime().availableProcessors(), seconds,
                java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(), String.join("\n", report));
    }

    private static void run(BackplaneHost host, BackplaneHost callerRuns, OrtEnvironment env, String name, int width, double seconds, List<String> report)
            throws Exception {
        Path dir = TestModels.repository().resolveSibling("bench").resolve(name);
        ModelConfig config = Benchmarks.config(name, width);
        try (ModelHarness m = TestModels.harness(config, dir).start();
                SessionOptions options = SessionSettings.from(name, Map.of(), config.parameters(), 1).toOptions();
                OrtSession direct = env.createSession(dir.resolve("1/model.onnx").toString(), options)) {
            for (int batch : new int[] {1, 8, 32}) {
                float[] flat = new float[batch * width];
                List<InferenceRequest> rows = new ArrayList<>(batch); // what clients send: one row each
                for (int r = 0; r < batch; r++) {
                    float[] row = new float[width];
                    for (int c = 0; c < width; c++) {
                        row[c] = (r * width + c) % 13 * 0.1f;
                        flat[r * width + c] = row[c];
                    }
                    rows.add(InferenceRequest.builder(name).input(Tensor.ofFloats("INPUT0", new long[] {1, width}, row)).build());
                }
                long[] shape = {batch, width};
                InferenceRequest whole = InferenceRequest.builder(name).input(Tensor.ofFloats("INPUT0", shape, flat)).build();
                Map<String, Runner> paths = new LinkedHashMap<>();
                paths.put("ort-direct", () -> {
                    try (OnnxTensor in = OnnxTensor.createTensor(env, FloatBuffer.wrap(flat), shape);
                            OrtSession.Result result = direct.run(Map.of("INPUT0", in))) {
                        float[] out = new float[batch * width];
                        ((OnnxTensor) result.get(0)).getFloatBuffer().get(out);
                    }
                });
                paths.put("host", () -> {
                    if (host.infer(whole).get(10, TimeUnit.SECONDS).output("OUTPUT0").elementCount() != batch * width) {
                        throw new IllegalStateException("wrong output size");
                    }
                });
                paths.put("host-cr", () -> {
                    if (callerRuns.infer(whole).get(10, TimeUnit.SECONDS).output("OUTPUT0").elementCount() != batch * width) {
                        throw new IllegalStateException("wrong output size");
                    }
                });
                InferenceRequest[] rowRequests = rows.toArray(InferenceRequest[]::new);
                paths.put("backend", () -> {
                    for (InferenceResponse r : m.run(rowRequests)) {
                        if (r.isError()) {
                            throw new IllegalStateException(String.valueOf(r.error()));
                        }
                    }
                });
                alternate(paths, 0.5); // warm-up
                Map<String, Samples> samples = alternate(paths, seconds);
                Samples base = samples.get("ort-direct");
                for (Map.Entry<String, Samples> e : samples.entrySet()) {
                    Samples s = e.getValue();
                    String overhead = e.getKey().equals("ort-direct") ? "" : String.format(Locale.ROOT, "%+.1f%%", 100.0 * (p(s, 0.5) - p(base, 0.5)) / p(base, 0.5));
                    report.add(String.format(Locale.ROOT, "%-10s %-6d %-10s %12.0f %10.1f %10.1f %10.1f %10s", name, batch, e.getKey(),
                            s.nanos.size() / (s.total / 1e9) * batch, p(s, 0.1), p(s, 0.5), p(s, 0.99), overhead));
                }
            }
        }
    }

    /** Runs the paths in turn, one call each, for about {@code seconds}; returns each path's samples. */
    private static Map<String, Samples> alternate(Map<String, Runner> paths, double seconds) throws Exception {
        Map<String, Samples> out = new LinkedHashMap<>();
        paths.keySet().forEach(k -> out.put(k, new Samples()));
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            for (Map.Entry<String, Runner> e : paths.entrySet()) {
                long t0 = System.nanoTime();
                e.getValue().runBatch();
                long t = System.nanoTime() - t0;
                Samples s = out.get(e.getKey());
                s.nanos.add(t);
                s.total += t;
            }
        }
        return out;
    }

    private static double p(Samples s, double q) {
        List<Long> sorted = new ArrayList<>(s.nanos);
        sorted.sort(null);
        return sorted.get((int) Math.min(sorted.size() - 1, Math.floor(q * sorted.size()))) / 1e3;
    }
}
