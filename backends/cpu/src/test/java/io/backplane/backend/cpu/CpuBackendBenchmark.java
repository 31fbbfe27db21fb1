package io.backplane.backend.cpu;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.OrtSession.SessionOptions;
import io.backplane.spi.Backend;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Throughput and median latency of two models at batch 1, 8 and 32 — bench/mlp (64 -> 256 -> 64,
 * FP32: microseconds of compute, so overhead shows at its largest) and bench/mlp_large (512 -> 2048
 * -> 512: a realistic small model) — through the cpu backend (B requests of one row each, batched
 * by the backend: concatenation,
 * one ORT run, split) beside ONNX Runtime's Java API called directly on the same model file with
 * the same session options (one tensor of B rows built from a float[], run, output copied out).
 * Single thread, one intra-op thread each, the two paths alternating call by call so that machine
 * noise hits both alike.
 *
 * <p>Run (see docs/backends/cpu.md):
 * <pre>
 * ./mvnw -q -B -pl backends/cpu -am test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp backends/cpu/target/test-classes:backends/cpu/target/classes:$(cat backends/cpu/target/cp.txt) \
 *     io.backplane.backend.cpu.CpuBackendBenchmark [seconds-per-measurement, default 2]
 * </pre>
 */
public final class CpuBackendBenchmark {
    private static final Logger LOG = LoggerFactory.getLogger(CpuBackendBenchmark.class);

    private CpuBackendBenchmark() {
    }

    interface Runner {
        void runBatch() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 2.0;
        Backend backend = new OnnxBackendFactory().create(new Fakes.Backend(Map.of()));
        OrtEnvironment env = Ort.environment();
        List<String> report = new ArrayList<>();
        try {
            run(backend, env, "mlp", 64, seconds, report);
            run(backend, env, "mlp_large", 512, seconds, report);
        } finally {
            backend.close();
        }
        LOG.info("cpu backend benchmark, ORT {}, {} cpus, {} s per measurement, load average {}:\n{}", env.getVersion(),
                Runtime.getRuntime().availableProcessors(), seconds,
                java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(), String.join("\n", report));
    }

    private static void run(Backend backend, OrtEnvironment env, String name, int width, double seconds, List<String> report) throws Exception {
        Path dir = TestModels.repository().resolveSibling("bench").resolve(name);
        ModelConfig config = Benchmarks.config(name, width);
        report.add(String.format(Locale.ROOT, "%-10s %-6s %-10s %12s %10s %10s %10s", "model", "batch", "path", "rows/s", "p10 us", "p50 us", "p99 us"));
        try (TestModels.Loaded m = new TestModels.Loaded(backend, new Fakes.Model(config, dir, new Fakes.Backend(Map.of())));
                SessionOptions options = SessionSettings.from(name, Map.of(), config.parameters(), 1).toOptions();
                OrtSession direct = env.createSession(dir.resolve("1/model.onnx").toString(), options)) {
            for (int batch : new int[] {1, 8, 32}) {
                float[] flat = new float[batch * width];
                List<InferenceRequest> requests = new ArrayList<>(batch); // what clients send: one row each
                for (int r = 0; r < batch; r++) {
                    float[] row = new float[width];
                    for (int c = 0; c < width; c++) {
                        row[c] = (r * width + c) % 13 * 0.1f;
                        flat[r * width + c] = row[c];
                    }
                    requests.add(InferenceRequest.builder(name).input(Tensor.ofFloats("INPUT0", new long[] {1, width}, row)).build());
                }
                Runner viaBackend = () -> {
                    List<ScheduledRequest> scheduled = new ArrayList<>(batch);
                    for (InferenceRequest req : requests) {
                        scheduled.add(new Fakes.Request(req, 1));
                    }
                    m.instance.execute(scheduled);
                    for (ScheduledRequest r : scheduled) {
                        if (((Fakes.Request) r).response().isError()) {
                            throw new IllegalStateException(String.valueOf(((Fakes.Request) r).response().error()));
                        }
                    }
                };
                long[] shape = {batch, width};
                Runner ortDirect = () -> {
                    try (OnnxTensor in = OnnxTensor.createTensor(env, FloatBuffer.wrap(flat), shape);
                            OrtSession.Result result = direct.run(Map.of("INPUT0", in))) {
                        float[] out = new float[batch * width];
                        ((OnnxTensor) result.get(0)).getFloatBuffer().get(out);
                    }
                };
                // Warm up both, then alternate call by call, so that load from other processes hits both paths alike.
                alternate(viaBackend, ortDirect, 0.5, new ArrayList<>(), new ArrayList<>(), new long[2], new long[2]);
                List<Long> backendNanos = new ArrayList<>();
                List<Long> directNanos = new ArrayList<>();
                long[] backendCount = new long[2];
                long[] directCount = new long[2];
                alternate(viaBackend, ortDirect, seconds, backendNanos, directNanos, backendCount, directCount);
                report.add(line(name, batch, "backplane", backendNanos, backendCount));
                report.add(line(name, batch, "ort-direct", directNanos, directCount));
                double overhead = 100.0 * (rate(directCount) - rate(backendCount)) / rate(directCount);
                report.add(String.format(Locale.ROOT, "%-10s %-6d overhead: throughput %.1f%%, p50 %+.1f%%", name, batch, overhead,
                        100.0 * (p(backendNanos, 0.5) - p(directNanos, 0.5)) / p(directNanos, 0.5)));
            }
        }
    }

    /** Runs {@code a} and {@code b} alternately for about {@code seconds}, timing each call. */
    private static void alternate(Runner a, Runner b, double seconds, List<Long> aNanos, List<Long> bNanos, long[] aCount, long[] bCount)
            throws Exception {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            time(a, aNanos, aCount);
            time(b, bNanos, bCount);
        }
    }

    private static void time(Runner r, List<Long> nanos, long[] count) throws Exception {
        long t0 = System.nanoTime();
        r.runBatch();
        long t = System.nanoTime() - t0;
        nanos.add(t);
        count[0]++;
        count[1] += t;
    }

    private static double rate(long[] count) {
        return count[0] / (count[1] / 1e9);
    }

    private static double p(List<Long> nanos, double q) {
        List<Long> sorted = new ArrayList<>(nanos);
        sorted.sort(null);
        return sorted.get((int) Math.min(sorted.size() - 1, Math.floor(q * sorted.size()))) / 1e3;
    }

    private static String line(String model, int batch, String path, List<Long> nanos, long[] count) {
        return String.format(Locale.ROOT, "%-10s %-6d %-10s %12.0f %10.1f %10.1f %10.1f", model, batch, path, rate(count) * batch,
                p(nanos, 0.1), p(nanos, 0.5), p(nanos, 0.99));
    }
}
