package io.backplane.benchmarks.peers;

import ai.djl.inference.Predictor;
import ai.djl.modality.Input;
import ai.djl.modality.Output;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ZooModel;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import java.io.IOException;
import java.io.InputStream;
import java.net.ServerSocket;
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
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Stream;

/**
 * Issue 16's side-by-side table: Backplane's python backend through the embedded host (what a
 * blocking caller of {@code BackplaneHost.infer(...).get()} sees), DJL's Python engine and a
 * gunicorn/Flask service, each serving the same identity model ({@code float[]} in, a numpy copy
 * out), run alternately case by case, with ratios. Needs {@code python3} with numpy, flask and
 * gunicorn; DJL runs offline with that interpreter.
 *
 * <p>Options: {@code --rounds N} (default 2; the table shows the median), {@code --seconds S}
 * per measurement (default 5), {@code --warmup S} seconds of the same calls before each
 * measurement, for every peer alike (default 5: the JIT compiles the hot path after some ten
 * thousand calls, and a short warm-up measures the interpreter), {@code --peers backplane,djl,flask}, {@code --python PATH},
 * {@code --cases TEXT} (only the cases whose name contains TEXT), {@code --spin-us N} (the python
 * backend's {@code spin_us} parameter; its default otherwise).
 */
public final class PeersBenchmark {
    private static final int SMALL = 4;
    private static final int LARGE = (1 << 20) / Float.BYTES;

    /** One case of the table. */
    record Case(String name, int floats, int callers, int instances, boolean batching, boolean latency) {
    }

    static final List<Case> CASES = List.of(
            new Case("4 floats, 1 caller", SMALL, 1, 1, false, true),
            new Case("1 MiB, 1 caller", LARGE, 1, 1, false, true),
            new Case("4 floats, 8 callers, 1 instance, dynamic batching", SMALL, 8, 1, true, false),
            new Case("4 floats, 8 callers, 2 instances, dynamic batching", SMALL, 8, 2, true, false),
            new Case("4 floats, 8 callers, 2 instances, no batching", SMALL, 8, 2, false, false),
            new Case("1 MiB, 8 callers, 2 instances, dynamic batching", LARGE, 8, 2, true, false));

    /** A served identity model; {@link #call} blocks until the answer is back. */
    interface Peer extends AutoCloseable {
        Caller caller() throws Exception;

        @Override
        void close() throws IOException;
    }

    /** One caller thread's handle (DJL predictors are per thread). */
    interface Caller extends AutoCloseable {
        float[] call(float[] x) throws Exception;

        @Override
        default void close() {
        }
    }

    /** What one measurement found. */
    record Result(double p50us, double p90us, double p99us, double meanUs, double perSecond) {
    }

    private static volatile String spinMicros; // null: the backend's default
    private static volatile int warmupSeconds = 5;

    private PeersBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"); // DJL logs every worker's lines at INFO
        }
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i], args[i + 1]);
        }
        int rounds = Integer.parseInt(opts.getOrDefault("--rounds", "2"));
        int seconds = Integer.parseInt(opts.getOrDefault("--seconds", "5"));
        warmupSeconds = Integer.parseInt(opts.getOrDefault("--warmup", "5"));
        String python = opts.getOrDefault("--python", "python3");
        List<String> peers = List.of(opts.getOrDefault("--peers", "backplane,djl,flask").split(","));
        for (String p : peers) {
            if (!List.of("backplane", "djl", "flask").contains(p)) {
                throw new IllegalArgumentException("--peers: unknown peer '" + p + "'; use backplane, djl and/or flask");
            }
        }
        String only = opts.getOrDefault("--cases", "");
        spinMicros = opts.get("--spin-us");
        Path work = Files.createTempDirectory("bp-peers");
        try {
            Map<String, Map<String, List<Result>>> results = new LinkedHashMap<>();
            for (Case c : CASES) {
                if (!c.name().contains(only)) {
                    continue;
                }
                for (int round = 0; round < rounds; round++) {
                    for (String p : peers) {
                        System.err.printf(Locale.ROOT, "[%s] %s, round %d%n", p, c.name(), round + 1);
                        try (Peer peer = start(p, c, work, python)) {
                            Result r = measure(peer, c, seconds);
                            results.computeIfAbsent(c.name(), k -> new LinkedHashMap<>()).computeIfAbsent(p, k -> new ArrayList<>()).add(r);
                        }
                    }
                }
            }
            print(results, peers);
        } finally {
            deleteTree(work);
        }
    }

    static Peer start(String name, Case c, Path work, String python) throws Exception {
        return switch (name) {
            case "backplane" -> BackplanePeer.start(c, work, python);
            case "djl" -> DjlPeer.start(c, work, python);
            default -> FlaskPeer.start(c, work, python);
        };
    }

    static Result measure(Peer peer, Case c, int seconds) throws Exception {
        float[] x = new float[c.floats()];
        for (int i = 0; i < x.length; i++) {
            x[i] = i;
        }
        AtomicBoolean measuring = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        LongAdder done = new LongAdder();
        List<long[]> lat = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        CountDownLatch warm = new CountDownLatch(c.callers());
        Exception[] failure = new Exception[1];
        for (int t = 0; t < c.callers(); t++) {
            long[] samples = new long[4_000_000];
            int[] count = new int[1];
            lat.add(samples);
            threads.add(Thread.ofPlatform().name("peers-caller-" + t).start(() -> {
                try (Caller caller = peer.caller()) {
                    for (int i = 0; i < 200; i++) {
                        check(caller.call(x), x);
                    }
                    warm.countDown();
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        float[] y = caller.call(x);
                        long t1 = System.nanoTime();
                        if (measuring.get() && count[0] < samples.length - 1) {
                            samples[++count[0]] = t1 - t0;
                            done.increment();
                        }
                        if (y.length != x.length) {
                            check(y, x);
                        }
                    }
                    samples[0] = count[0];
                } catch (Exception e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                    warm.countDown();
                }
            }));
        }
        warm.await();
        Thread.sleep(warmupSeconds * 1000L);
        measuring.set(true);
        long start = System.nanoTime();
        Thread.sleep(seconds * 1000L);
        measuring.set(false);
        long elapsed = System.nanoTime() - start;
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        if (failure[0] != null) {
            throw failure[0];
        }
        int total = 0;
        for (long[] s : lat) {
            total += (int) s[0];
        }
        long[] all = new long[total];
        int k = 0;
        for (long[] s : lat) {
            System.arraycopy(s, 1, all, k, (int) s[0]);
            k += (int) s[0];
        }
        Arrays.sort(all);
        double mean = Arrays.stream(all).average().orElse(0) / 1000.0;
        return new Result(pct(all, 0.50), pct(all, 0.90), pct(all, 0.99), mean, done.sum() * 1e9 / elapsed);
    }

    private static double pct(long[] sorted, double q) {
        return sorted.length == 0 ? 0 : sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))] / 1000.0;
    }

    private static void check(float[] y, float[] x) {
        if (!Arrays.equals(x, y)) {
            throw new IllegalStateException("the identity model answered " + y.length + " floats that differ from the " + x.length + " sent");
        }
    }

    static void print(Map<String, Map<String, List<Result>>> results, List<String> peers) {
        StringBuilder head = new StringBuilder("| case | figure |");
        StringBuilder rule = new StringBuilder("|---|---|");
        for (String p : peers) {
            head.append(' ').append(p).append(" |");
            rule.append("---|");
        }
        for (String p : peers) {
            if (!p.equals("backplane") && peers.contains("backplane")) {
                head.append(" backplane vs ").append(p).append(" |");
                rule.append("---|");
            }
        }
        System.out.println(head);
        System.out.println(rule);
        for (Case c : CASES) {
            Map<String, List<Result>> byPeer = results.get(c.name());
            if (byPeer == null) {
                continue; // not measured (--cases)
            }
            List<String> figures = c.latency() ? List.of("p50 µs", "p90 µs", "p99 µs", "mean µs", "calls/s") : List.of("calls/s");
            for (String f : figures) {
                StringBuilder row = new StringBuilder("| " + c.name() + " | " + f + " |");
                Map<String, Double> v = new LinkedHashMap<>();
                for (String p : peers) {
                    double m = median(byPeer.getOrDefault(p, List.of()), f);
                    v.put(p, m);
                    row.append(String.format(Locale.ROOT, " %.1f |", m));
                }
                for (String p : peers) {
                    if (!p.equals("backplane") && v.containsKey("backplane")) {
                        double b = v.get("backplane");
                        double o = v.get(p);
                        // ratio > 1: Backplane is better (lower latency, higher rate)
                        double ratio = f.equals("calls/s") ? b / o : o / b;
                        row.append(String.format(Locale.ROOT, " %.2f× |", ratio));
                    }
                }
                System.out.println(row);
            }
        }
        System.out.println("(median of the rounds; a ratio above 1 means Backplane is better)");
    }

    private static double median(List<Result> rs, String figure) {
        double[] v = rs.stream().mapToDouble(r -> switch (figure) {
            case "p50 µs" -> r.p50us();
            case "p90 µs" -> r.p90us();
            case "p99 µs" -> r.p99us();
            case "mean µs" -> r.meanUs();
            default -> r.perSecond();
        }).sorted().toArray();
        if (v.length == 0) {
            return Double.NaN;
        }
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    static Path resource(String name, Path dir) throws IOException {
        Files.createDirectories(dir);
        Path target = dir.resolve(name.substring(name.lastIndexOf('/') + 1));
        try (InputStream in = PeersBenchmark.class.getResourceAsStream("/peers/" + name)) {
            if (in == null) {
                throw new IllegalStateException("resource /peers/" + name + " is missing from the jar");
            }
            Files.copy(in, target);
        }
        return target;
    }

    static byte[] bytes(float[] x) {
        ByteBuffer b = ByteBuffer.allocate(x.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(x);
        return b.array();
    }

    static float[] floats(byte[] b) {
        float[] f = new float[b.length / Float.BYTES];
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(f);
        return f;
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        }
    }

    /** The python backend through the embedded host, called as a blocking caller would. */
    static final class BackplanePeer implements Peer {
        private final BackplaneHost host;
        private final Path repo;

        private BackplanePeer(BackplaneHost host, Path repo) {
            this.host = host;
            this.repo = repo;
        }

        static BackplanePeer start(Case c, Path work, String python) throws Exception {
            Path repo = Files.createTempDirectory(work, "repo");
            resource("backplane/model.py", repo.resolve("identity/1"));
            Files.writeString(repo.resolve("identity/config.pbtxt"), """
                    name: "identity"
                    backend: "python"
                    max_batch_size: 8
                    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
                    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
                    instance_group [ { kind: KIND_CPU count: %d } ]
                    parameters { key: "python_interpreter" value: { string_value: "%s" } }
                    %s
                    %s
                    """.formatted(c.instances(), python, c.batching() ? "dynamic_batching { }" : "",
                    spinMicros == null ? "" : "parameters { key: \"spin_us\" value: { string_value: \"" + spinMicros + "\" } }"));
            BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).callerRuns(Boolean.getBoolean("peers.callerRuns")).build();
            return new BackplanePeer(host, repo);
        }

        @Override
        public Caller caller() {
            return x -> host.infer(InferenceRequest.builder("identity").input(Tensor.ofFloats("INPUT0", new long[] {1, x.length}, x)).build())
                    .get().output("OUTPUT0").toFloatArray();
        }

        @Override
        public void close() throws IOException {
            host.close();
            deleteTree(repo);
        }
    }

    /** DJL's Python engine (one python worker per predictor, its default), offline. */
    static final class DjlPeer implements Peer {
        private final ZooModel<Input, Output> model;
        private final Path dir;

        private DjlPeer(ZooModel<Input, Output> model, Path dir) {
            this.model = model;
            this.dir = dir;
        }

        static DjlPeer start(Case c, Path work, String python) throws Exception {
            Path dir = Files.createTempDirectory(work, "djl");
            resource("djl/model.py", dir);
            Criteria<Input, Output> criteria = Criteria.builder().setTypes(Input.class, Output.class).optModelPath(dir).optEngine("Python")
                    .optOption("pythonExecutable", python).optOption("minWorkers", Integer.toString(c.instances()))
                    .optOption("maxWorkers", Integer.toString(c.instances())).build();
            return new DjlPeer(criteria.loadModel(), dir);
        }

        @Override
        public Caller caller() {
            Predictor<Input, Output> p = model.newPredictor();
            return new Caller() {
                @Override
                public float[] call(float[] x) throws Exception {
                    Input in = new Input();
                    in.add(bytes(x));
                    Output out = p.predict(in);
                    return floats(out.getData().getAsBytes());
                }

                @Override
                public void close() {
                    p.close();
                }
            };
        }

        @Override
        public void close() throws IOException {
            model.close();
            deleteTree(dir);
        }
    }

    /** A gunicorn/Flask service on loopback, one sync worker per instance, over HTTP/1.1. */
    static final class FlaskPeer implements Peer {
        private final Process process;
        private final URI uri;
        private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

        private FlaskPeer(Process process, URI uri) {
            this.process = process;
            this.uri = uri;
        }

        static FlaskPeer start(Case c, Path work, String python) throws Exception {
            Path dir = Files.createTempDirectory(work, "flask");
            resource("flask/app.py", dir);
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            }
            Process p = new ProcessBuilder(python, "-m", "gunicorn", "-w", Integer.toString(c.instances()), "-b", "127.0.0.1:" + port,
                    "--chdir", dir.toString(), "--log-level", "warning", "app:app").redirectErrorStream(true)
                    .redirectOutput(work.resolve("gunicorn-" + port + ".log").toFile()).start();
            FlaskPeer peer = new FlaskPeer(p, URI.create("http://127.0.0.1:" + port + "/infer"));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                try {
                    peer.caller().call(new float[] {1});
                    return peer;
                } catch (IOException e) {
                    if (!p.isAlive() || System.nanoTime() > deadline) {
                        peer.close();
                        throw new IllegalStateException("gunicorn did not start on port " + port + " (is 'pip install flask gunicorn' done for "
                                + python + "?): see " + work.resolve("gunicorn-" + port + ".log"), e);
                    }
                    Thread.sleep(50);
                }
            }
        }

        @Override
        public Caller caller() {
            return x -> {
                HttpResponse<byte[]> r = client.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(60))
                        .POST(HttpRequest.BodyPublishers.ofByteArray(bytes(x))).build(), HttpResponse.BodyHandlers.ofByteArray());
                if (r.statusCode() != 200) {
                    throw new IOException("flask answered " + r.statusCode());
                }
                return floats(r.body());
            };
        }

        @Override
        public void close() {
            client.close();
            process.destroy();
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor();
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
