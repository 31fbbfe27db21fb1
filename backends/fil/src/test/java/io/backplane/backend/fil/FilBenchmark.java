package io.backplane.backend.fil;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import ml.dmlc.xgboost4j.java.Booster;
import ml.dmlc.xgboost4j.java.DMatrix;
import ml.dmlc.xgboost4j.java.XGBoost;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The tree goals, in one run: a 500-tree XGBoost model (depth 6) on 32 features, trained
 * here, served by the fil backend in an embedded host, beside xgboost4j called directly on the same
 * model file ({@code Booster.inplace_predict}, the call the backend makes).
 * <ul>
 *   <li>{@code direct} vs {@code host} vs {@code host-cr}: one caller, requests of 1 and of 256 rows,
 *       alternating round by round; the ratio is host/direct per call (lower is better, 1.00 = no
 *       overhead). {@code host} hands each request to the instance's worker thread and back (two
 *       thread wake-ups); {@code host-cr} is a host built with {@code callerRuns(true)}, which runs
 *       the model on the calling thread when an instance is idle;</li>
 *   <li>{@code batched} vs {@code unbatched}: 32 callers of one row each, the same model with
 *       {@code dynamic_batching} and without (max_batch_size 0 is not FIL's; "without" is the same
 *       config lacking {@code dynamic_batching}), throughput in rows/s.</li>
 * </ul>
 * A benchmark, never a test: it prints a table and asserts nothing. Run (docs/backends/fil.md):
 * <pre>
 * ./mvnw -q -B -pl backends/fil -am test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp backends/fil/target/test-classes:backends/fil/target/classes:$(cat backends/fil/target/cp.txt) \
 *     io.backplane.backend.fil.FilBenchmark [seconds-per-measurement, default 3]
 * </pre>
 */
public final class FilBenchmark {
    private static final Logger LOG = LoggerFactory.getLogger(FilBenchmark.class);
    private static final int FEATURES = 32;
    private static final int TREES = 500;

    private FilBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        Path dir = Files.createTempDirectory("fil-bench");
        try {
            run(dir, seconds, threads);
        } finally {
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static void run(Path dir, double seconds, int threads) throws Exception {
        byte[] model = train();
        Path repo = dir.resolve("models");
        String base = """
                backend: "fil"
                max_batch_size: 256
                input [ { name: "input__0" data_type: TYPE_FP32 dims: [ %d ] } ]
                output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
                instance_group [ { kind: KIND_CPU count: %d } ]
                parameters [ { key: "model_type" value: { string_value: "xgboost_json" } },
                             { key: "output_class" value: { string_value: "false" } },
                             { key: "cpu_nthread" value: { string_value: "%d" } } ]
                %s
                """;
        FilRepository.write(repo, "trees", base.formatted(FEATURES, 1, threads, ""), "xgboost.json", model);
        FilRepository.write(repo, "trees_unbatched", base.formatted(FEATURES, 2, threads, ""), "xgboost.json", model);
        FilRepository.write(repo, "trees_batched", base.formatted(FEATURES, 2, threads, "dynamic_batching { max_queue_delay_microseconds: 500 }"),
                "xgboost.json", model);
        Booster direct = XGBoost.loadModel(repo.resolve("trees/1/xgboost.json").toString());
        if (threads > 0) {
            direct.setParam("nthread", Integer.toString(threads)); // the same threads as the served model
        }
        float[] rows = TreeModels.rows(11, 256 * FEATURES / TreeModels.FEATURES); // any values; NaN-free is not required
        float[] x256 = new float[256 * FEATURES];
        for (int i = 0; i < x256.length; i++) {
            x256[i] = rows[i % rows.length];
        }
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).backend(new FilBackendFactory()).build();
                BackplaneHost callerRuns = BackplaneHost.builder().modelRepository(repo).backend(new FilBackendFactory()).callerRuns(true).build()) {
            StringBuilder out = new StringBuilder();
            out.append(String.format(Locale.ROOT, "%n| rows/request | direct µs/call | host µs/call | host/direct | host-cr µs/call | host-cr/direct |%n"
                    + "|---|---|---|---|---|---|%n"));
            for (int n : new int[] {1, 256}) {
                float[] x = java.util.Arrays.copyOf(x256, n * FEATURES);
                InferenceRequest req = InferenceRequest.builder("trees").input(Tensor.ofFloats("input__0", new long[] {n, FEATURES}, x)).build();
                double d = 0;
                double h = 0;
                double c = 0;
                for (int round = 0; round < 4; round++) { // alternate, so that other load hits all alike; the first round warms up
                    double dr = perCall(seconds / 3, () -> direct.inplace_predict(x, n, FEATURES, Float.NaN));
                    double hr = perCall(seconds / 3, () -> check(host.infer(req).get(30, TimeUnit.SECONDS)));
                    double cr = perCall(seconds / 3, () -> check(callerRuns.infer(req).get(30, TimeUnit.SECONDS)));
                    if (round > 0) {
                        d += dr / 3;
                        h += hr / 3;
                        c += cr / 3;
                    }
                }
                out.append(String.format(Locale.ROOT, "| %d | %.1f | %.1f | %.3f | %.1f | %.3f |%n", n, d / 1e3, h / 1e3, h / d, c / 1e3, c / d));
            }
            double unbatched = 0;
            double batched = 0;
            for (int round = 0; round < 3; round++) {
                double u = throughput(host, "trees_unbatched", x256, 32, seconds);
                double b = throughput(host, "trees_batched", x256, 32, seconds);
                if (round > 0) {
                    unbatched += u / 2;
                    batched += b / 2;
                }
            }
            out.append(String.format(Locale.ROOT, "%n| 32 callers, 1 row each | rows/s |%n|---|---|%n| without dynamic_batching | %.0f |%n"
                    + "| with dynamic_batching | %.0f |%n| ratio | %.2f× |%n", unbatched, batched, batched / unbatched));
            LOG.info("FilBenchmark ({} trees, {} features, cpu_nthread {}, {} s per measurement):{}", TREES, FEATURES, threads, seconds, out);
        } finally {
            direct.dispose();
        }
    }

    private static void check(InferenceResponse r) {
        if (r.isError()) {
            throw new IllegalStateException(String.valueOf(r.error()));
        }
    }

    interface Call {
        void run() throws Exception;
    }

    /** Mean nanoseconds per call over about {@code seconds}. */
    private static double perCall(double seconds, Call call) throws Exception {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long calls = 0;
        long start = System.nanoTime();
        while (System.nanoTime() < end) {
            call.run();
            calls++;
        }
        return (System.nanoTime() - start) / (double) calls;
    }

    /** Rows per second with {@code callers} threads each sending one-row requests for about {@code seconds}. */
    private static double throughput(BackplaneHost host, String model, float[] pool, int callers, double seconds) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(callers);
        AtomicLong done = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        List<Future<?>> running = new ArrayList<>();
        try {
            for (int c = 0; c < callers; c++) {
                int offset = (c % 256) * FEATURES;
                InferenceRequest req = InferenceRequest.builder(model)
                        .input(Tensor.ofFloats("input__0", new long[] {1, FEATURES}, java.util.Arrays.copyOfRange(pool, offset, offset + FEATURES))).build();
                running.add(threads.submit(() -> {
                    start.await();
                    long end = System.nanoTime() + (long) (seconds * 1e9);
                    while (System.nanoTime() < end) {
                        check(host.infer(req).get(30, TimeUnit.SECONDS));
                        done.incrementAndGet();
                    }
                    return null;
                }));
            }
            long t0 = System.nanoTime();
            start.countDown(); // each caller sends until its deadline
            for (Future<?> f : running) {
                f.get(60, TimeUnit.SECONDS);
            }
            return done.get() / ((System.nanoTime() - t0) / 1e9);
        } finally {
            threads.shutdownNow();
            threads.awaitTermination(30, TimeUnit.SECONDS);
        }
    }

    /** A 500-tree, depth-6 regressor on 32 features, trained on 20,000 random rows; its JSON bytes. */
    private static byte[] train() throws Exception {
        int n = 20_000;
        java.util.Random random = new java.util.Random(5);
        float[] x = new float[n * FEATURES];
        float[] y = new float[n];
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int f = 0; f < FEATURES; f++) {
                float v = (float) random.nextGaussian();
                x[i * FEATURES + f] = v;
                s += (f % 3 == 0 ? v * v : v) * (f + 1) / FEATURES;
            }
            y[i] = (float) (s + random.nextGaussian() * 0.1);
        }
        DMatrix d = new DMatrix(x, n, FEATURES, Float.NaN);
        try {
            d.setLabel(y);
            Map<String, Object> params = new HashMap<>();
            params.put("objective", "reg:squarederror");
            params.put("max_depth", 6);
            params.put("eta", 0.1);
            params.put("seed", 3);
            Booster b = XGBoost.train(d, params, TREES, Map.of(), null, null);
            try {
                return b.toByteArray("json");
            } finally {
                b.dispose();
            }
        } finally {
            d.dispose();
        }
    }
}
