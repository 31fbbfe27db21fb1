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
 * Issue 16's and 27's side-by-side table: Backplane's python backend through the embedded host (what
 * a blocking caller of {@code BackplaneHost.infer(...).get()} sees), DJL's Python engine and a
 * gunicorn/Flask service, each serving the same identity model ({@code float[]} in, a numpy copy
 * out), run alternately case by case, with ratios. Needs {@code python3} with numpy, flask and
 * gunicorn; DJL runs offline with that interpreter.
 *
 * <p>Two kinds of figures, side by side: <b>cold</b>, the first {@code --cold N} calls (default
 * 20,000; 0 skips them) of one caller right after the peer reports ready, on a freshly loaded model
 * every round, in a fresh JVM every round ({@code --cold-jvm fresh}, the default: a server just
 * started; {@code same}: a model (re)loaded in this warm JVM, as after a scale-out or a reload), with
 * the time the peer took to become ready; and <b>warm</b>, {@code --seconds S} (default 5) of calls
 * after {@code --warmup S} seconds of the same calls (default 5; the JIT compiles the hot path after
 * some ten thousand calls, and a short warm-up measures the interpreter), for every peer alike.
 *
 * <p>Options: {@code --rounds N} (default 2; the table shows the median, and the per-round figures
 * of the 1- and 2-instance cases without batching), {@code --peers backplane,djl,flask},
 * {@code --python PATH}, {@code --cases TEXT} (only the warm cases whose name contains TEXT; several
 * separated by {@code ;}), {@code --spin-us N} (the python backend's {@code spin_us} parameter; its
 * default otherwise), {@code --java-options "..."} (added to the cold rounds' JVMs, e.g. an AOT cache),
 * {@code --preset issue27} (backplane and djl, 3 rounds, the cold case and the three 4-float cases of
 * issue 27: about 5 minutes).
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
            new Case("4 floats, 8 callers, 1 instance, no batching", SMALL, 8, 1, false, false),
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

    /** The cases of issue 27 ({@code --preset issue27}). */
    static final List<String> ISSUE27_CASES = List.of("4 floats, 1 caller", "4 floats, 8 callers, 1 instance, no batching",
            "4 floats, 8 callers, 2 instances, no batching");
    static final String ONE_INSTANCE = "4 floats, 8 callers, 1 instance, no batching";
    static final String TWO_INSTANCES = "4 floats, 8 callers, 2 instances, no batching";

    /** What one measurement found; {@code readyMs} is the time to ready of a cold round (NaN for warm ones). */
    record Result(double p50us, double p90us, double p99us, double meanUs, double perSecond, double readyMs) {
        Result(double p50us, double p90us, double p99us, double meanUs, double perSecond) {
            this(p50us, p90us, p99us, meanUs, perSecond, Double.NaN);
        }
    }

    /** How each peer was set up, printed beside the figures (the first start of each peer fills it). */
    static final Map<String, String> CONFIGURATION = new java.util.concurrent.ConcurrentHashMap<>();

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
        boolean issue27 = "issue27".equals(opts.get("--preset"));
        if (opts.containsKey("--preset") && !issue27) {
            throw new IllegalArgumentException("--preset: unknown preset '" + opts.get("--preset") + "'; use issue27");
        }
        int rounds = Integer.parseInt(opts.getOrDefault("--rounds", issue27 ? "3" : "2"));
        int seconds = Integer.parseInt(opts.getOrDefault("--seconds", "5"));
        warmupSeconds = Integer.parseInt(opts.getOrDefault("--warmup", "5"));
        int coldCalls = Integer.parseInt(opts.getOrDefault("--cold", "20000"));
        String coldJvm = opts.getOrDefault("--cold-jvm", "fresh");
        if (!List.of("fresh", "same").contains(coldJvm)) {
            throw new IllegalArgumentException("--cold-jvm: '" + coldJvm + "'; use fresh (a JVM per cold round) or same (this JVM)");
        }
        String python = opts.getOrDefault("--python", "python3");
        List<String> peers = List.of(opts.getOrDefault("--peers", issue27 ? "backplane,djl" : "backplane,djl,flask").split(","));
        for (String p : peers) {
            if (!List.of("backplane", "djl", "flask").contains(p)) {
                throw new IllegalArgumentException("--peers: unknown peer '" + p + "'; use backplane, djl and/or flask");
            }
        }
        List<String> only = List.of(opts.getOrDefault("--cases", "").split(";"));
        spinMicros = opts.get("--spin-us");
        if (opts.containsKey("--child-cold")) { // one cold round in this fresh JVM, for the parent to read
            Path work = Files.createTempDirectory("bp-peers");
            try {
                Result r = coldRound(opts.get("--child-cold"), coldCalls, work, python);
                System.out.printf(Locale.ROOT, "COLD %f %f %f %f %f %f%n", r.p50us(), r.p90us(), r.p99us(), r.meanUs(), r.perSecond(), r.readyMs());
                CONFIGURATION.forEach((k, v) -> System.out.println("CONFIG " + k + "\t" + v));
            } finally {
                deleteTree(work);
            }
            return;
        }
        Path work = Files.createTempDirectory("bp-peers");
        long began = System.nanoTime();
        try {
            Map<String, Map<String, List<Result>>> results = new LinkedHashMap<>();
            Map<String, List<String>> figures = new LinkedHashMap<>();
            if (coldCalls > 0) {
                String row = "4 floats, 1 caller, cold: the first " + coldCalls + " calls after ready ("
                        + (coldJvm.equals("fresh") ? "a fresh JVM" : "a fresh model in this JVM") + " each round)";
                figures.put(row, List.of("ready ms", "p50 µs", "p90 µs", "p99 µs", "mean µs", "calls/s"));
                for (int round = 0; round < rounds; round++) {
                    for (String p : peers) {
                        System.err.printf(Locale.ROOT, "[%s] cold, round %d%n", p, round + 1);
                        Result r = coldJvm.equals("fresh") ? coldRoundInFreshJvm(p, coldCalls, python, opts.getOrDefault("--java-options", ""))
                                : coldRound(p, coldCalls, work, python);
                        results.computeIfAbsent(row, k -> new LinkedHashMap<>()).computeIfAbsent(p, k -> new ArrayList<>()).add(r);
                    }
                }
            }
            for (Case c : CASES) {
                boolean wanted = issue27 && !opts.containsKey("--cases") ? ISSUE27_CASES.contains(c.name())
                        : only.stream().anyMatch(o -> c.name().contains(o));
                if (!wanted) {
                    continue;
                }
                String row = c.name() + (c.latency() ? ", warm" : "");
                figures.put(row, c.latency() ? List.of("p50 µs", "p90 µs", "p99 µs", "mean µs", "calls/s") : List.of("calls/s"));
                for (int round = 0; round < rounds; round++) {
                    for (String p : peers) {
                        System.err.printf(Locale.ROOT, "[%s] %s, round %d%n", p, c.name(), round + 1);
                        try (Peer peer = start(p, c, work, python)) {
                            Result r = measure(peer, c, seconds);
                            results.computeIfAbsent(row, k -> new LinkedHashMap<>()).computeIfAbsent(p, k -> new ArrayList<>()).add(r);
                        }
                    }
                }
            }
            print(results, figures, peers);
            printConfiguration(peers, rounds, seconds, coldCalls, coldJvm);
            System.out.printf(Locale.ROOT, "(the run took %.0f s)%n", (System.nanoTime() - began) / 1e9);
        } finally {
            deleteTree(work);
        }
    }

    /** One cold round here: a fresh peer, then its first {@code calls} calls from one caller, no warm-up at all. */
    static Result coldRound(String name, int calls, Path work, String python) throws Exception {
        Case c = CASES.get(0); // 4 floats, 1 caller, 1 instance
        float[] x = new float[c.floats()];
        for (int i = 0; i < x.length; i++) {
            x[i] = i;
        }
        long t0 = System.nanoTime();
        try (Peer peer = start(name, c, work, python); Caller caller = peer.caller()) {
            double readyMs = (System.nanoTime() - t0) / 1e6;
            long[] lat = new long[calls];
            long begin = System.nanoTime();
            for (int i = 0; i < calls; i++) {
                long a = System.nanoTime();
                float[] y = caller.call(x);
                lat[i] = System.nanoTime() - a;
                if (y.length != x.length) {
                    check(y, x);
                }
            }
            double perSecond = calls * 1e9 / (System.nanoTime() - begin);
            double mean = Arrays.stream(lat).average().orElse(0) / 1000.0;
            Arrays.sort(lat);
            return new Result(pct(lat, 0.50), pct(lat, 0.90), pct(lat, 0.99), mean, perSecond, readyMs);
        }
    }

    /** One cold round in a JVM of its own (this JVM's options, plus {@code javaOptions}); its figures come back on its stdout. */
    static Result coldRoundInFreshJvm(String name, int calls, String python, String javaOptions) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
        if (!javaOptions.isBlank()) {
            cmd.addAll(List.of(javaOptions.trim().split("\\s+")));
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), PeersBenchmark.class.getName(), "--child-cold", name,
                "--cold", Integer.toString(calls), "--python", python));
        if (spinMicros != null) {
            cmd.addAll(List.of("--spin-us", spinMicros));
        }
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        Result r = null;
        try (var in = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream(), java.nio.charset.StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("COLD ")) {
                    double[] v = Arrays.stream(line.substring(5).trim().split(" ")).mapToDouble(Double::parseDouble).toArray();
                    r = new Result(v[0], v[1], v[2], v[3], v[4], v[5]);
                } else if (line.startsWith("CONFIG ")) {
                    String[] kv = line.substring(7).split("\t", 2);
                    CONFIGURATION.putIfAbsent(kv[0], kv[1]);
                } else {
                    System.out.println(line);
                }
            }
        }
        if (p.waitFor() != 0 || r == null) {
            throw new IllegalStateException("the cold round of " + name + " in a fresh JVM failed (exit " + p.exitValue() + "): " + cmd);
        }
        return r;
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
        long[] all = latencies(lat);
        double mean = Arrays.stream(all).average().orElse(0) / 1000.0;
        return new Result(pct(all, 0.50), pct(all, 0.90), pct(all, 0.99), mean, done.sum() * 1e9 / elapsed);
    }

    /**
     * Every caller's measured latencies in one sorted array; each caller's array holds its count at
     * [0] and its latencies (ns) after it.
     */
    static long[] latencies(List<long[]> perCaller) {
        int total = 0;
        for (long[] s : perCaller) {
            total += (int) s[0];
        }
        long[] all = new long[total];
        int k = 0;
        for (long[] s : perCaller) {
            System.arraycopy(s, 1, all, k, (int) s[0]);
            k += (int) s[0];
        }
        Arrays.sort(all);
        return all;
    }

    private static double pct(long[] sorted, double q) {
        return sorted.length == 0 ? 0 : sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))] / 1000.0;
    }

    private static void check(float[] y, float[] x) {
        if (!Arrays.equals(x, y)) {
            throw new IllegalStateException("the identity model answered " + y.length + " floats that differ from the " + x.length + " sent");
        }
    }

    static void print(Map<String, Map<String, List<Result>>> results, Map<String, List<String>> figuresByRow, List<String> peers) {
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
        for (Map.Entry<String, List<String>> row : figuresByRow.entrySet()) {
            Map<String, List<Result>> byPeer = results.get(row.getKey());
            if (byPeer == null) {
                continue;
            }
            for (String f : row.getValue()) {
                StringBuilder line = new StringBuilder("| " + row.getKey() + " | " + f + " |");
                Map<String, Double> v = new LinkedHashMap<>();
                for (String p : peers) {
                    double m = median(byPeer.getOrDefault(p, List.of()), f);
                    v.put(p, m);
                    line.append(String.format(Locale.ROOT, " %.1f |", m));
                }
                for (String p : peers) {
                    if (!p.equals("backplane") && v.containsKey("backplane")) {
                        double b = v.get("backplane");
                        double o = v.get(p);
                        // ratio > 1: Backplane is better (lower latency, higher rate)
                        double ratio = f.equals("calls/s") ? b / o : o / b;
                        line.append(String.format(Locale.ROOT, " %.2f× |", ratio));
                    }
                }
                System.out.println(line);
            }
        }
        System.out.println("(median of the rounds; a ratio above 1 means Backplane is better)");
        Map<String, List<Result>> one = results.get(ONE_INSTANCE);
        Map<String, List<Result>> two = results.get(TWO_INSTANCES);
        if (one != null && two != null) {
            System.out.println();
            System.out.println("8 callers, no batching, calls/s round by round (1 instance -> 2 instances):");
            for (String p : peers) {
                List<Result> a = one.getOrDefault(p, List.of());
                List<Result> b = two.getOrDefault(p, List.of());
                StringBuilder sb = new StringBuilder("  " + p + ":");
                boolean never = true;
                for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
                    sb.append(String.format(Locale.ROOT, " round %d %.0f -> %.0f;", i + 1, a.get(i).perSecond(), b.get(i).perSecond()));
                    never &= b.get(i).perSecond() >= a.get(i).perSecond();
                }
                System.out.println(sb + (never ? " 2 instances never below 1" : " 2 instances BELOW 1 in some round"));
            }
        }
    }

    static void printConfiguration(List<String> peers, int rounds, int seconds, int coldCalls, String coldJvm) {
        System.out.println();
        System.out.printf(Locale.ROOT, "Run: %d rounds; warm = %d s measured after a %d s warm-up (--warmup) and 200 checked calls; cold = the"
                + " first %d calls after ready, one caller, %s; JDK %s (%s)%n", rounds, seconds, warmupSeconds, coldCalls,
                coldJvm.equals("fresh") ? "a fresh JVM and model each round" : "a fresh model each round in this JVM", Runtime.version(),
                System.getProperty("java.vm.name"));
        for (String p : peers) {
            String c = CONFIGURATION.get(p);
            if (c != null) {
                System.out.println("  " + p + ": " + c);
            }
        }
    }

    private static double median(List<Result> rs, String figure) {
        double[] v = rs.stream().mapToDouble(r -> switch (figure) {
            case "p50 µs" -> r.p50us();
            case "p90 µs" -> r.p90us();
            case "p99 µs" -> r.p99us();
            case "mean µs" -> r.meanUs();
            case "ready ms" -> r.readyMs();
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

        /** {@code -Dpeers.builtinWarmup=N}: the host's built-in warm-up on, N requests (the model parameter {@code builtin_warmup}); unset: off. */
        private static final String WARMUP = System.getProperty("peers.builtinWarmup");
        /** {@code -Dpeers.ownWarmupMs=N}: the host's own warm-up (the Python backend's identity model) for N ms before ready; unset: off. */
        private static final long OWN_WARMUP_MS = Long.getLong("peers.ownWarmupMs", 0);

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
                    %s
                    """.formatted(c.instances(), python, c.batching() ? "dynamic_batching { }" : "",
                    spinMicros == null ? "" : "parameters { key: \"spin_us\" value: { string_value: \"" + spinMicros + "\" } }",
                    WARMUP == null ? "" : "parameters { key: \"builtin_warmup\" value: { string_value: \"" + WARMUP + "\" } }"));
            BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE)
                    .callerRuns(Boolean.getBoolean("peers.callerRuns")).builtinWarmup(WARMUP != null)
                    .ownWarmup(java.time.Duration.ofMillis(OWN_WARMUP_MS)).build();
            CONFIGURATION.putIfAbsent("backplane", "embedded host, python backend, identity model.py, " + c.instances() + " instance(s) per"
                    + " case, python_interpreter " + python + ", spin_us " + (spinMicros == null ? "default" : spinMicros) + ", stubs "
                    + (Boolean.getBoolean("backplane.python.noFork") ? "spawned (-Dbackplane.python.noFork=true)" : "forked from a warm template")
                    + ", infer(...).get() on the caller's thread" + (Boolean.getBoolean("peers.callerRuns") ? ", callerRuns" : "")
                    + (WARMUP == null ? ", no built-in warm-up (the embedded builder's default)" : ", built-in warm-up of up to " + WARMUP
                            + " requests (at most 2 s) before ready (-Dpeers.builtinWarmup)")
                    + (OWN_WARMUP_MS == 0 ? ", no own warm-up" : ", the host's own warm-up for " + OWN_WARMUP_MS + " ms before ready (-Dpeers.ownWarmupMs)")
                    + (java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments().stream().anyMatch(a -> a.startsWith("-XX:AOTCache="))
                            ? ", AOT cache" : "")
                    + ", JDK " + Runtime.version());
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

    /**
     * DJL's Python engine, set up as DJL's documentation sets it up, offline:
     * <ul>
     * <li>the engine is the published {@code ai.djl.python:python} artifact with its own dependencies
     *     (https://docs.djl.ai/docs/serving/engines/python/index.html, "Installation"): DJL 0.34 on the Netty
     *     4.1 it is published against (this module pins {@code netty.version}; the parent's Netty 4.2 BOM
     *     had moved it onto Netty 4.2 here);</li>
     * <li>"we recommend creating a new Predictor for each thread ... Alternatively, you can also use a pool
     *     of Predictors" (https://docs.djl.ai/docs/development/inference_performance_optimization.html,
     *     "Multithreading Support"). Outside DJL Serving's MPI mode, each {@code newPredictor()} of the Python
     *     engine starts a Python process of its own, and {@code minWorkers}/{@code maxWorkers}
     *     (https://docs.djl.ai/docs/serving/serving/docs/configurations_model.html) are read only by DJL
     *     Serving's WorkLoadManager: a predictor per caller thread would run one Python process per caller,
     *     whatever the instance count. So an instance here is one predictor (one Python worker), and
     *     callers share a pool of them: each call takes a predictor, runs {@code predict} on the caller's
     *     thread, and gives it back. With one caller and one instance that is the documented predictor per
     *     thread. The pool is filled (the workers started) before the peer reports ready.</li>
     * <li>the workers count is also passed as {@code minWorkers}/{@code maxWorkers}, as serving.properties
     *     would, so that the model's properties say it.</li>
     * </ul>
     */
    static final class DjlPeer implements Peer {
        private final ZooModel<Input, Output> model;
        private final Path dir;
        private final java.util.concurrent.BlockingQueue<Predictor<Input, Output>> pool;
        private final List<Predictor<Input, Output>> all;

        private DjlPeer(ZooModel<Input, Output> model, Path dir, List<Predictor<Input, Output>> all) {
            this.model = model;
            this.dir = dir;
            this.all = all;
            this.pool = new java.util.concurrent.ArrayBlockingQueue<>(all.size(), false, all);
        }

        static DjlPeer start(Case c, Path work, String python) throws Exception {
            Path dir = Files.createTempDirectory(work, "djl");
            resource("djl/model.py", dir);
            Criteria<Input, Output> criteria = Criteria.builder().setTypes(Input.class, Output.class).optModelPath(dir).optEngine("Python")
                    .optOption("pythonExecutable", python).optOption("minWorkers", Integer.toString(c.instances()))
                    .optOption("maxWorkers", Integer.toString(c.instances())).build();
            ZooModel<Input, Output> model = criteria.loadModel();
            List<Predictor<Input, Output>> predictors = new ArrayList<>();
            for (int i = 0; i < c.instances(); i++) {
                predictors.add(model.newPredictor()); // starts its Python worker
            }
            CONFIGURATION.putIfAbsent("djl", "DJL " + ai.djl.engine.Engine.getDjlVersion() + ", engine " + model.getWrappedModel().getNDManager()
                    .getEngine().getEngineName() + ", pythonExecutable " + python + ", one Python worker per Predictor, a pool of"
                    + " as many Predictors as instances (minWorkers=maxWorkers=instances; model says minWorkers="
                    + model.getProperty("minWorkers") + " maxWorkers=" + model.getProperty("maxWorkers") + " for " + c.instances()
                    + "), predict() on the caller's thread, Netty " + nettyVersion() + " (epoll " + epoll() + "), slf4j-simple level "
                    + System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") + ", JDK " + Runtime.version());
            return new DjlPeer(model, dir, predictors);
        }

        private static String nettyVersion() {
            try {
                // the shaded jar keeps one module's version file: any module tells the version
                return io.netty.util.Version.identify().values().stream().findFirst().map(io.netty.util.Version::artifactVersion).orElse("unknown");
            } catch (RuntimeException | LinkageError e) {
                return "unknown";
            }
        }

        private static String epoll() {
            try {
                return io.netty.channel.epoll.Epoll.isAvailable() ? "available" : "unavailable";
            } catch (RuntimeException | LinkageError e) {
                return "absent";
            }
        }

        @Override
        public Caller caller() {
            return x -> {
                Predictor<Input, Output> p = pool.take();
                try {
                    Input in = new Input();
                    in.add(bytes(x));
                    Output out = p.predict(in);
                    return floats(out.getData().getAsBytes());
                } finally {
                    pool.put(p);
                }
            };
        }

        @Override
        public void close() throws IOException {
            all.forEach(Predictor::close);
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
