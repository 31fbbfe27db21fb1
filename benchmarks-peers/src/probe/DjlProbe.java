import ai.djl.inference.Predictor;
import ai.djl.modality.Input;
import ai.djl.modality.Output;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;

/**
 * DJL's Python engine alone, one caller, one Predictor, 4 floats: the plain harness of issue 27, to
 * run DJL on another JDK than the peers benchmark's (which needs JDK 25), from the same jar and
 * model. Java 17 source, run by the source launcher:
 * {@code <java> -cp benchmarks-peers/target/peers.jar benchmarks-peers/src/probe/DjlProbe.java [python3] [warm-up s] [measured s]}.
 */
public class DjlProbe {
    public static void main(String[] args) throws Exception {
        String python = args.length > 0 ? args[0] : "python3";
        int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        Path dir = Files.createTempDirectory("djl-probe");
        try (var in = DjlProbe.class.getClassLoader().getResourceAsStream("peers/djl/model.py")) {
            Files.copy(in, dir.resolve("model.py"));
        }
        Criteria<Input, Output> criteria = Criteria.builder().setTypes(Input.class, Output.class).optModelPath(dir).optEngine("Python")
                .optOption("pythonExecutable", python).build();
        float[] x = {0, 1, 2, 3};
        ByteBuffer b = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(x);
        byte[] bytes = b.array();
        try (ZooModel<Input, Output> model = criteria.loadModel(); Predictor<Input, Output> p = model.newPredictor()) {
            long[] lat = new long[4_000_000];
            int n = 0;
            long end = System.nanoTime() + warmup * 1_000_000_000L;
            while (System.nanoTime() < end) {
                call(p, bytes);
            }
            long begin = System.nanoTime();
            end = begin + seconds * 1_000_000_000L;
            long t;
            while ((t = System.nanoTime()) < end && n < lat.length) {
                call(p, bytes);
                lat[n++] = System.nanoTime() - t;
            }
            double rate = n * 1e9 / (System.nanoTime() - begin);
            long[] s = Arrays.copyOf(lat, n);
            double mean = Arrays.stream(s).average().orElse(0) / 1000;
            Arrays.sort(s);
            System.out.printf(Locale.ROOT, "DJL %s, JDK %s, Netty %s: p50 %.1f µs, p90 %.1f, p99 %.1f, mean %.1f, %.0f calls/s (%d s after %d s warm-up)%n",
                    ai.djl.engine.Engine.getDjlVersion(), Runtime.version(),
                    io.netty.util.Version.identify().values().stream().findFirst().map(io.netty.util.Version::artifactVersion).orElse("?"),
                    s[n / 2] / 1000.0, s[(int) (n * 0.9)] / 1000.0, s[(int) (n * 0.99)] / 1000.0, mean, rate, seconds, warmup);
        } finally {
            try (var w = Files.walk(dir)) {
                w.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    private static void call(Predictor<Input, Output> p, byte[] bytes) throws Exception {
        Input in = new Input();
        in.add(bytes);
        Output out = p.predict(in);
        if (out.getData().getAsBytes().length != bytes.length) {
            throw new IllegalStateException("the identity answered another length");
        }
    }
}
