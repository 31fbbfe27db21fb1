package io.backplane.backend.torch;

import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The TorchScript goals in one JVM and one run: a zoo TorchScript model ({@code resnet50_pt}
 * or {@code bert_pt}, made by {@code benchmarks/zoo/make_zoo.py}) served by the pytorch backend in an
 * embedded host beside DJL's PyTorch engine called directly on the same {@code model.pt} with the same
 * threads (intra-op {@code --threads}, inter-op 1), alternating round by round:
 * <ul>
 *   <li>1 caller: {@code djl} (a predictor) vs {@code host} (the model without dynamic batching, the
 *       request handed to the instance's worker) and {@code host-cr} (a host with
 *       {@code callerRuns(true)}): per-call p50;</li>
 *   <li>8 and 32 callers: {@code djl}, a predictor per caller, all calling {@code forward()} on one
 *       module concurrently, vs {@code host} with the model's {@code dynamic_batching} (one instance):
 *       requests per second.</li>
 * </ul>
 * A benchmark, never a test: it logs a table and asserts nothing. Run (docs/backends/pytorch.md):
 * <pre>
 * PY=$(tools/model-env.sh | tail -n 1); "$PY" benchmarks/zoo/make_zoo.py --out target/zoo --size full --models resnet50_pt,bert_pt
 * ./mvnw -q -B -pl backends/torch -am test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp backends/torch/target/test-classes:backends/torch/target/classes:$(cat backends/torch/target/cp.txt) \
 *     io.backplane.backend.torch.TorchBenchmark target/zoo/resnet50_pt [threads=2] [seconds=3] [seq=32] [rounds=2]
 * </pre>
 */
public final class TorchBenchmark {
    private static final Logger LOG = LoggerFactory.getLogger(TorchBenchmark.class);

    private TorchBenchmark() {
    }

    interface Call {
        void run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        Path model = Path.of(args[0]).toAbsolutePath();
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 3;
        int seq = args.length > 3 ? Integer.parseInt(args[3]) : 32;
        int rounds = args.length > 4 ? Integer.parseInt(args[4]) : 2;
        System.setProperty("ai.djl.offline", "true");
        System.setProperty("ai.djl.pytorch.num_threads", Integer.toString(threads));
        System.setProperty("ai.djl.pytorch.num_interop_threads", "1");
        ModelConfig zoo = ModelConfigParser.parseModelDirectory(model);
        Path repo = Files.createTempDirectory("torch-bench");
        try (Arena arena = Arena.ofShared()) {
            String original = Files.readString(model.resolve("config.pbtxt"));
            String threadParameters = "parameters { key: \"INTRA_OP_THREAD_COUNT\" value: { string_value: \"" + threads + "\" } }\n"
                    + "parameters { key: \"INTER_OP_THREAD_COUNT\" value: { string_value: \"1\" } }\n";
            String body = original.replaceFirst("name: \"[^\"]*\"\n", "").replaceAll("(?s)model_warmup \\[.*", "");
            copy(repo, model, "batched", body + threadParameters);
            copy(repo, model, "plain", body.replaceAll("(?s)dynamic_batching \\{[^}]*\\}", "") + threadParameters);
            List<Tensor> inputs = inputs(zoo, seq, arena);
            StringBuilder table = new StringBuilder();
            try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).allowLinksOutsideRepository(true).modelControlMode(ModelControlMode.NONE)
                    .backend(new TorchBackendFactory()).build();
                    BackplaneHost callerRuns = BackplaneHost.builder().modelRepository(repo).allowLinksOutsideRepository(true).modelControlMode(ModelControlMode.EXPLICIT)
                            .loadModel("plain").backend(new TorchBackendFactory()).callerRuns(true).build();
                    ZooModel<NDList, NDList> djl = Criteria.builder().setTypes(NDList.class, NDList.class).optEngine("PyTorch")
                            .optModelPath(model.resolve("1/model.pt")).build().loadModel()) {
                Call hostPlain = () -> check(host.infer(request("plain", inputs)).get(120, TimeUnit.SECONDS));
                Call hostCr = () -> check(callerRuns.infer(request("plain", inputs)).get(120, TimeUnit.SECONDS));
                Call hostBatched = () -> check(host.infer(request("batched", inputs)).get(120, TimeUnit.SECONDS));
                double[][] p50 = new double[3][rounds];
                int[] callers = {8, 32};
                double[][][] rps = new double[callers.length][2][rounds];
                try (Predictor<NDList, NDList> one = djl.newPredictor()) {
                    Call direct = () -> djlCall(djl, one, inputs);
                    for (int w = 0; w < 3; w++) { // warm-up: libtorch's first calls optimise the graph
                        direct.run();
                        hostPlain.run();
                        hostCr.run();
                        hostBatched.run();
                    }
                    for (int r = 0; r < rounds; r++) {
                        p50[0][r] = p50(direct, seconds);
                        p50[1][r] = p50(hostPlain, seconds);
                        p50[2][r] = p50(hostCr, seconds);
                    }
                }
                List<Predictor<NDList, NDList>> predictors = new ArrayList<>();
                try {
                    for (int r = 0; r < rounds; r++) {
                        for (int c = 0; c < callers.length; c++) {
                            rps[c][0][r] = throughput(callers[c], seconds, () -> {
                                Predictor<NDList, NDList> own = djl.newPredictor();
                                predictors.add(own);
                                return () -> djlCall(djl, own, inputs);
                            });
                            rps[c][1][r] = throughput(callers[c], seconds, () -> hostBatched);
                        }
                    }
                } finally {
                    predictors.forEach(Predictor::close);
                }
                table.append(String.format(Locale.ROOT, "%n| 1 caller | djl p50 ms | host p50 ms | host/djl | host-cr p50 ms | host-cr/djl |%n"
                        + "|---|---|---|---|---|---|%n| %s | %.1f | %.1f | %.3f | %.1f | %.3f |%n", model.getFileName(), median(p50[0]) / 1e6,
                        median(p50[1]) / 1e6, median(p50[1]) / median(p50[0]), median(p50[2]) / 1e6, median(p50[2]) / median(p50[0])));
                table.append(String.format(Locale.ROOT, "%n| callers | djl req/s (a predictor each) | host batched req/s | host/djl |%n|---|---|---|---|%n"));
                for (int c = 0; c < callers.length; c++) {
                    double d = median(rps[c][0]);
                    double h = median(rps[c][1]);
                    table.append(String.format(Locale.ROOT, "| %d | %.1f | %.1f | %.2f× |%n", callers[c], d, h, h / d));
                }
            }
            LOG.info("TorchBenchmark ({}, intra-op {}, inter-op 1, {} s × {} rounds, seq {}):{}", model.getFileName(), threads, seconds, rounds, seq, table);
        } finally {
            try (var files = Files.walk(repo)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static void copy(Path repo, Path model, String name, String config) throws java.io.IOException {
        Path v1 = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.createSymbolicLink(v1.resolve("model.pt"), model.resolve("1/model.pt")); // the zoo's file, not a copy (allowLinksOutsideRepository)
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), "name: \"" + name + "\"\n" + config);
    }

    /** One request of one row: FP32 inputs Gaussian, INT64 inputs token ids in [1, 1000) (masks all ones); variable dims {@code seq}. */
    private static List<Tensor> inputs(ModelConfig config, int seq, Arena arena) {
        SplittableRandom rnd = new SplittableRandom(25);
        List<Tensor> out = new ArrayList<>();
        for (TensorConfig tc : config.inputs()) {
            long[] shape = new long[tc.modelDims().size() + 1];
            shape[0] = 1;
            long n = 1;
            for (int d = 0; d < tc.modelDims().size(); d++) {
                long v = tc.modelDims().get(d);
                shape[d + 1] = v < 0 ? seq : v;
                n *= shape[d + 1];
            }
            MemorySegment m = arena.allocate(n * tc.dataType().byteSize(), 64);
            for (long i = 0; i < n; i++) {
                switch (tc.dataType()) {
                    case FP32 -> m.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, (float) rnd.nextGaussian());
                    case INT64 -> m.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, tc.name().contains("mask") ? 1 : rnd.nextLong(1, 1000));
                    default -> throw new IllegalArgumentException("input '" + tc.name() + "' is " + tc.dataType() + "; the benchmark makes FP32 and INT64");
                }
            }
            out.add(Tensor.of(tc.name(), tc.dataType(), shape, m));
        }
        return out;
    }

    private static InferenceRequest request(String model, List<Tensor> inputs) {
        return InferenceRequest.builder(model).inputs(inputs).build();
    }

    private static void djlCall(ZooModel<NDList, NDList> model, Predictor<NDList, NDList> p, List<Tensor> inputs) throws Exception {
        try (NDManager nd = model.getNDManager().newSubManager()) {
            NDList in = new NDList();
            for (Tensor t : inputs) {
                in.add(nd.create(t.data().asByteBuffer().order(ByteOrder.LITTLE_ENDIAN), new Shape(t.shape()),
                        t.dataType() == DataType.INT64 ? ai.djl.ndarray.types.DataType.INT64 : ai.djl.ndarray.types.DataType.FLOAT32));
            }
            NDList out = p.predict(in);
            for (ai.djl.ndarray.NDArray a : out) {
                a.toByteArray(); // every output copied out, as the backend does
            }
            out.close();
        }
    }

    private static void check(InferenceResponse r) {
        if (r.isError()) {
            throw new IllegalStateException(String.valueOf(r.error()));
        }
    }

    /** The median nanoseconds per call of about {@code seconds} of calls (at least 5). */
    private static double p50(Call call, double seconds) throws Exception {
        List<Long> t = new ArrayList<>();
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end || t.size() < 5) {
            long t0 = System.nanoTime();
            call.run();
            t.add(System.nanoTime() - t0);
        }
        long[] a = t.stream().mapToLong(Long::longValue).sorted().toArray();
        return a[a.length / 2];
    }

    interface CallMaker {
        Call make() throws Exception;
    }

    /** Requests per second of {@code callers} threads, each calling until the deadline. */
    private static double throughput(int callers, double seconds, CallMaker maker) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(callers);
        AtomicLong done = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        List<Future<?>> running = new ArrayList<>();
        try {
            long[] t0 = new long[1];
            for (int c = 0; c < callers; c++) {
                Call call = maker.make();
                running.add(pool.submit(() -> {
                    start.await();
                    long end = t0[0] + (long) (seconds * 1e9);
                    while (System.nanoTime() < end) {
                        call.run();
                        done.incrementAndGet();
                    }
                    return null;
                }));
            }
            t0[0] = System.nanoTime();
            start.countDown();
            for (Future<?> f : running) {
                f.get(10, TimeUnit.MINUTES);
            }
            return done.get() / ((System.nanoTime() - t0[0]) / 1e9);
        } finally {
            pool.shutdownNow();
            pool.awaitTermination(1, TimeUnit.MINUTES);
        }
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
