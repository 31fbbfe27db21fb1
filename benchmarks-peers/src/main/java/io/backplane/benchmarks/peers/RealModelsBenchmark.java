package io.backplane.benchmarks.peers;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.onnxruntime.OrtEnvironment;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import static io.backplane.benchmarks.peers.RealModelPeers.*;
import static io.backplane.benchmarks.peers.RealModelsTable.*;

/**
 * Issue 25's table: real models (the zoo of {@code benchmarks/zoo/make_zoo.py}: ResNet-50 and a
 * BERT-base encoder with random weights) served by Backplane and by the peers a Java shop would
 * pick for exactly that model, alternately round by round on the same model files and the same
 * inputs, with ratios. See {@code docs/benchmarks.md} for what is measured and the command.
 *
 * <ul>
 *   <li>ONNX ({@code resnet50}, {@code bert}): {@code ort} (ONNX Runtime's Java API called directly,
 *       the floor), {@code backplane} (the ONNX backend through the embedded host), {@code rest}
 *       ({@code backplane serve} over REST, a child process), {@code djl-ort} (DJL's ONNX Runtime
 *       engine). All with the same session settings: intra-op threads {@code --threads}, inter-op 1,
 *       sequential, all graph optimisations, one session.</li>
 *   <li>The torch encoder ({@code bert_torch}, the zoo's {@code model.py} and its weights):
 *       {@code python} (the Python backend through the embedded host), {@code python-rest}
 *       ({@code backplane serve} REST, Python backend), {@code djl-python} (DJL's Python engine),
 *       {@code flask} (gunicorn/Flask), {@code ray} (Ray Serve), {@code djl-pt} (DJL's PyTorch
 *       engine on a TorchScript trace of the same encoder and weights). torch threads
 *       {@code --threads}, one instance / worker / replica each.</li>
 *   <li>TorchScript ({@code resnet50_pt}, {@code bert_pt}: the zoo's traces of the same weights,
 *       {@code model.pt}): {@code pytorch-rest} ({@code backplane serve} over REST, the pytorch
 *       backend of {@code backends/pytorch/}), {@code djl-pt} (DJL's PyTorch engine called directly
 *       on the same file: the floor). libtorch intra-op threads {@code --threads}, inter-op 1, one
 *       module each. The pytorch backend runs only in {@code backplane serve}: its DJL (0.36) and
 *       this jar's (0.34, for DJL's Python engine) cannot share one JVM.</li>
 * </ul>
 *
 * <p>Cases per model and peer: batch 1 with 1 caller (p50/p99 latency), 8 and 32 closed-loop
 * callers without and (Backplane only: the others have no batcher) with the model's dynamic
 * batching. Load time is from asking for the model to its first answer; RSS is the resident set of
 * the serving process and its children (VmRSS from /proc) before and after that, measured in a
 * child JVM for the in-process peers ({@code --probe}).
 *
 * <p>Options: {@code --zoo DIR} (default {@code target/zoo}), {@code --size full|small},
 * {@code --models resnet50,bert,bert_torch,resnet50_pt,bert_pt}, {@code --peers ...}, {@code --rounds N} (default 2;
 * the table shows the median), {@code --seconds S} per measurement (default 2; longer until every caller was answered
 * once, at most 5×), {@code --warmup S} (default 0.5, after every caller's first answer), {@code --threads N} (default: the machine's
 * cores, at most 4), {@code --seq N} (BERT's sequence length, default 32), {@code --python PATH}
 * (default the model environment's), {@code --dist DIR} (run {@code DIR/bin/backplane serve}
 * instead of a child JVM of this jar), {@code --out FILE} (also write the markdown there).
 *
 * <p>This class is the harness (options, rounds, callers, measurements); the peers are in
 * {@link RealModelPeers}, the markdown in {@link RealModelsTable}.
 */
public final class RealModelsBenchmark {
    static final List<String> ONNX_PEERS = List.of("ort", "backplane", "rest", "djl-ort");
    static final List<String> TORCH_PEERS = List.of("python", "python-rest", "djl-python", "flask", "ray", "djl-pt");
    /** The peers of the TorchScript models (groups ending in {@code _pt}). */
    static final List<String> TORCHSCRIPT_PEERS = List.of("pytorch-rest", "djl-pt");
    static final List<String> GROUPS = List.of("resnet50", "bert", "bert_torch", "resnet50_pt", "bert_pt");
    static final List<String> BATCHERS = List.of("backplane", "rest", "python", "python-rest", "pytorch-rest");
    static final List<String> IN_PROCESS = List.of("ort", "backplane", "djl-ort", "python", "djl-python", "djl-pt");
    /** Pairs of the ratio table: the first against the second. */
    static final List<List<String>> PAIRS = List.of(List.of("backplane", "ort"), List.of("rest", "ort"), List.of("djl-ort", "ort"),
            List.of("backplane", "djl-ort"), List.of("rest", "djl-ort"), List.of("python-rest", "flask"), List.of("python-rest", "ray"),
            List.of("python", "djl-python"), List.of("python", "djl-pt"), List.of("python", "python-rest"), List.of("pytorch-rest", "djl-pt"));

    /** One measurement: how many callers, with the model's dynamic batching or without. */
    record Case(String key, String label, int callers, boolean batching) {
    }

    static final List<Case> CASES = List.of(new Case("c1", "1 caller", 1, false), new Case("c8", "8 callers", 8, false),
            new Case("c8b", "8 callers, dynamic batching", 8, true), new Case("c32", "32 callers", 32, false),
            new Case("c32b", "32 callers, dynamic batching", 32, true));

    /** What one measurement found. */
    record Result(double p50ms, double p99ms, double perSecond, long calls) {
    }

    /** Load time (ask → first answer) and the resident set before and after, in KiB. */
    record Load(double ms, long rssBeforeKb, long rssAfterKb) {
    }

    /** One input tensor of a batch-1 request, in every form a peer takes. */
    record In(String name, boolean int64, long[] shape, byte[] le, MemorySegment segment) {
        ByteBuffer direct() {
            return segment.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    /** A model of the zoo and the request every peer gets. */
    record Model(String group, String name, Path dir, List<In> inputs, List<String> outputs) {
        Path versionDir() {
            return dir.resolve("1");
        }
    }

    /** A served model; a caller blocks until its answer is back and returns the first output. */
    interface Peer extends AutoCloseable {
        Caller caller() throws Exception;

        /** A caller of the model with dynamic batching (Backplane serves both variants from one start), else {@link #caller()}. */
        default Caller caller(boolean batched) throws Exception {
            return caller();
        }

        /** Threads, workers, batching: printed beside the figures. */
        String config();

        default String config(boolean batched) {
            return config();
        }

        /** Child-process peers measure their own load; null for in-process ones (see --probe). */
        default Load load() {
            return null;
        }

        @Override
        void close();
    }

    /** One caller thread's handle (DJL predictors are per thread). */
    interface Caller extends AutoCloseable {
        float[] call() throws Exception;

        @Override
        default void close() {
        }
    }

    /** The run's settings and shared state. */
    static final class Ctx {
        Path zoo = Path.of("target/zoo");
        String size = "full";
        List<String> groups = List.of("resnet50", "bert", "bert_torch");
        List<String> peers = new ArrayList<>();
        int rounds = 2;
        double seconds = 2;
        double warmup = 0.5;
        int threads = Math.max(1, Math.min(4, Runtime.getRuntime().availableProcessors()));
        int seq = 32;
        String python = System.getProperty("user.home") + "/.cache/backplane/model-env/bin/python";
        Path dist;
        Path out;
        Path work;
        List<String> passThrough = new ArrayList<>();
        final Map<String, Path> torchScripts = new HashMap<>();
        final Map<String, String> configs = new LinkedHashMap<>();
    }

    private RealModelsBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        long rssAtStart = treeRssKb(ProcessHandle.current().pid()); // a probe's "before": ahead of any engine's library
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        Ctx ctx = new Ctx();
        String probe = null;
        String probeGroup = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--probe")) {
                probe = args[++i];
                probeGroup = args[++i];
                continue;
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("option " + a + " needs a value (see the class comment or docs/benchmarks.md)");
            }
            String v = args[++i];
            switch (a) {
                case "--zoo" -> ctx.zoo = Path.of(v);
                case "--size" -> ctx.size = oneOf("--size", v, List.of("full", "small"));
                case "--models" -> ctx.groups = listOf("--models", v, GROUPS);
                case "--peers" -> ctx.peers = new ArrayList<>(listOf("--peers", v, allPeers()));
                case "--rounds" -> ctx.rounds = positive("--rounds", v);
                case "--seconds" -> ctx.seconds = Double.parseDouble(v);
                case "--warmup" -> ctx.warmup = Double.parseDouble(v);
                case "--threads" -> ctx.threads = positive("--threads", v);
                case "--seq" -> ctx.seq = positive("--seq", v);
                case "--python" -> ctx.python = v;
                case "--dist" -> ctx.dist = Path.of(v);
                case "--out" -> ctx.out = Path.of(v);
                default -> throw new IllegalArgumentException("unknown option " + a + "; use --zoo, --size, --models, --peers, --rounds, --seconds, "
                        + "--warmup, --threads, --seq, --python, --dist, --out");
            }
            if (!a.equals("--peers") && !a.equals("--models") && !a.equals("--out") && !a.equals("--rounds")) {
                ctx.passThrough.add(a);
                ctx.passThrough.add(v);
            }
        }
        if (ctx.peers.isEmpty()) {
            ctx.peers.addAll(allPeers());
        }
        System.setProperty("ai.djl.offline", "true");
        System.setProperty("ai.djl.onnx.disable_alternative", "true"); // DJL's ORT engine would load libtorch for NDArray ops
        System.setProperty("ai.djl.pytorch.num_threads", Integer.toString(ctx.threads));
        System.setProperty("ai.djl.pytorch.num_interop_threads", "1");
        if (ctx.peers.contains("djl-ort")) {
            // DJL's ORT engine makes the process's one OrtEnvironment itself (with threading options) and fails where one
            // exists: it goes first. Sessions keep their own thread pools (no disablePerSessionThreads), for every peer alike.
            Engine.getEngine("OnnxRuntime");
        }
        ctx.work = Files.createTempDirectory("bp-real");
        try {
            if (probe != null) {
                probe(ctx, probe, probeGroup, rssAtStart);
            } else {
                run(ctx);
            }
        } finally {
            deleteTree(ctx.work);
        }
    }

    // ------------------------------------------------------------------------------------ the run

    static void run(Ctx ctx) throws Exception {
        String startLoad = loadAverage();
        Instant started = Instant.now();
        Map<String, Model> models = new LinkedHashMap<>();
        for (String g : ctx.groups) {
            models.put(g, model(ctx, g));
        }
        // group → peer → case → results; group → peer → loads
        Map<String, Map<String, Map<String, List<Result>>>> results = new LinkedHashMap<>();
        Map<String, Map<String, List<Load>>> loads = new LinkedHashMap<>();
        Map<String, String> checks = new LinkedHashMap<>();
        Map<String, String> skipped = new LinkedHashMap<>();
        Map<String, float[]> reference = new HashMap<>();
        for (int round = 0; round < ctx.rounds; round++) {
            for (Model m : models.values()) {
                for (String p : peersOf(ctx, m.group())) {
                    if (skipped.containsKey(m.group() + "/" + p)) {
                        continue;
                    }
                    boolean both = BATCHERS.contains(p);
                    String tag = m.group() + "/" + p;
                    System.err.printf(Locale.ROOT, "[round %d] %s: starting%n", round + 1, tag);
                    if (round == 0 && IN_PROCESS.contains(p)) {
                        try {
                            if (p.equals("djl-pt") && !torchScriptGroup(m.group())) {
                                torchScript(ctx, m); // made once, ahead of the load it is no part of
                            }
                            loads.computeIfAbsent(m.group(), k -> new LinkedHashMap<>()).computeIfAbsent(p, k -> new ArrayList<>())
                                    .add(probeInChild(ctx, p, m.group()));
                        } catch (Exception e) {
                            System.err.println("  load probe failed: " + e.getMessage());
                        }
                    }
                    Peer peer;
                    try {
                        peer = start(ctx, p, m, both);
                    } catch (Exception | LinkageError e) {
                        Throwable root = e;
                        while (root.getCause() != null) {
                            root = root.getCause();
                        }
                        String why = p + " could not start: " + e + (root == e ? "" : " (cause: " + root + ")");
                        e.printStackTrace();
                        System.err.println("SKIP " + tag + ": " + why);
                        skipped.put(tag, why);
                        continue;
                    }
                    try (peer) {
                        measureAll(ctx, peer, m, p, both, round, results, loads, checks, reference);
                    } catch (Exception e) {
                        String why = p + " failed: " + e;
                        System.err.println("FAILED " + tag + ": " + why);
                        e.printStackTrace();
                        skipped.put(tag, why);
                    }
                }
            }
        }
        String table = table(ctx, models, results, loads, checks, skipped, startLoad, started);
        System.out.println(table);
        if (ctx.out != null) {
            Files.writeString(ctx.out, table);
        }
    }

    static void measureAll(Ctx ctx, Peer peer, Model m, String p, boolean both, int round, Map<String, Map<String, Map<String, List<Result>>>> results,
            Map<String, Map<String, List<Load>>> loads, Map<String, String> checks, Map<String, float[]> reference) throws Exception {
        ctx.configs.put(m.group() + "/" + p, peer.config(false));
        if (both) {
            ctx.configs.put(m.group() + "/" + p + "/b", peer.config(true));
        }
        if (peer.load() != null) {
            loads.computeIfAbsent(m.group(), k -> new LinkedHashMap<>()).computeIfAbsent(p, k -> new ArrayList<>()).add(peer.load());
        }
        if (round == 0) {
            checks.put(m.group() + "/" + p, check(peer, m, reference));
        }
        for (Case c : CASES) {
            if (c.batching() && !both) {
                continue;
            }
            Result r = measure(peer, c.callers(), c.batching(), ctx);
            System.err.printf(Locale.ROOT, "  %s: %.1f/s, p50 %.1f ms, p99 %.1f ms (%d calls)%n", c.label(), r.perSecond(), r.p50ms(), r.p99ms(), r.calls());
            results.computeIfAbsent(m.group(), k -> new LinkedHashMap<>()).computeIfAbsent(p, k -> new LinkedHashMap<>())
                    .computeIfAbsent(c.key(), k -> new ArrayList<>()).add(r);
        }
    }

    static List<String> peersOf(Ctx ctx, String group) {
        List<String> all = torchScriptGroup(group) ? TORCHSCRIPT_PEERS : group.equals("bert_torch") ? TORCH_PEERS : ONNX_PEERS;
        return ctx.peers.stream().filter(all::contains).toList();
    }

    /** The first answer of a peer beside the first peer's of its model (same inputs, same weights). */
    static String check(Peer peer, Model m, Map<String, float[]> reference) throws Exception {
        float[] y;
        try (Caller c = peer.caller()) {
            y = c.call();
        }
        float[] ref = reference.putIfAbsent(m.group(), y);
        if (ref == null) {
            return "reference (" + y.length + " values)";
        }
        if (ref.length != y.length) {
            return "**differs**: " + y.length + " values, the reference " + ref.length;
        }
        double worst = 0;
        double scale = 1e-6;
        for (int i = 0; i < y.length; i++) {
            worst = Math.max(worst, Math.abs(ref[i] - y[i]));
            scale = Math.max(scale, Math.abs(ref[i]));
        }
        return String.format(Locale.ROOT, worst <= 1e-3 * scale ? "matches (max abs diff %.1e)" : "**differs** (max abs diff %.1e)", worst);
    }

    /** A started peer; {@code both}: Backplane serves the model twice, without and with dynamic batching ({@code <name>_batched}). */
    static Peer start(Ctx ctx, String p, Model m, boolean both) throws Exception {
        return switch (p) {
            case "ort" -> OrtPeer.start(ctx, m);
            case "backplane", "python" -> HostPeer.start(ctx, m, both);
            case "rest", "python-rest" -> RestPeer.start(ctx, m, both);
            case "pytorch-rest" -> {
                if (ctx.dist == null) {
                    throw new IllegalStateException("pytorch-rest serves from a distribution's backends/pytorch/: pass --dist dist/target/backplane "
                            + "(real-models.sh does); peers.jar's own server has no pytorch backend");
                }
                yield RestPeer.start(ctx, m, both);
            }
            case "djl-ort" -> DjlOrtPeer.start(ctx, m);
            case "djl-pt" -> DjlPtPeer.start(ctx, m);
            case "djl-python" -> DjlPythonPeer.start(ctx, m);
            case "flask" -> HttpPythonPeer.flask(ctx, m);
            case "ray" -> HttpPythonPeer.ray(ctx, m);
            default -> throw new IllegalArgumentException("unknown peer " + p);
        };
    }

    // ------------------------------------------------------------------------------- the models

    /** The zoo's model of a group at the run's size, and a fixed random request for it. */
    static Model model(Ctx ctx, String group) throws IOException {
        boolean small = ctx.size.equals("small");
        String name = switch (group) {
            case "resnet50" -> small ? "resnet_small" : "resnet50";
            case "bert" -> small ? "bert_small" : "bert";
            case "resnet50_pt" -> small ? "resnet_small_pt" : "resnet50_pt";
            case "bert_pt" -> small ? "bert_small_pt" : "bert_pt";
            default -> small ? "bert_torch_small" : "bert_torch";
        };
        Path dir = ctx.zoo.resolve(name).toAbsolutePath();
        if (!Files.isRegularFile(dir.resolve("config.pbtxt"))) {
            throw new IllegalArgumentException("the zoo has no " + name + " in " + ctx.zoo.toAbsolutePath() + ": make it with "
                    + "~/.cache/backplane/model-env/bin/python benchmarks/zoo/make_zoo.py --out " + ctx.zoo + " --size " + ctx.size + " --models " + group);
        }
        Random rnd = new Random(25);
        List<In> inputs = new ArrayList<>();
        if (group.equals("resnet50") || group.equals("resnet50_pt")) {
            String config = Files.readString(dir.resolve("config.pbtxt"));
            Matcher d = Pattern.compile("dims: \\[ *3, *(\\d+), *(\\d+) *]").matcher(config);
            if (!d.find()) {
                throw new IllegalStateException(dir.resolve("config.pbtxt") + " names no input of dims [ 3, H, W ]");
            }
            long[] shape = {1, 3, Long.parseLong(d.group(1)), Long.parseLong(d.group(2))};
            ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(3 * shape[2] * shape[3] * 4)).order(ByteOrder.LITTLE_ENDIAN);
            while (b.hasRemaining()) {
                b.putFloat((float) rnd.nextGaussian());
            }
            boolean pt = torchScriptGroup(group);
            inputs.add(in(pt ? "INPUT__0" : "input", false, shape, b.array()));
            return new Model(group, name, dir, inputs, List.of(pt ? "OUTPUT__0" : "logits"));
        }
        long[] shape = {1, ctx.seq};
        ByteBuffer ids = ByteBuffer.allocate(ctx.seq * 8).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer mask = ByteBuffer.allocate(ctx.seq * 8).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < ctx.seq; i++) {
            ids.putLong(i == 0 ? 101 : 1000 - 1 - rnd.nextInt(900)); // ids below 1000: inside the small vocabulary too
            mask.putLong(1);
        }
        inputs.add(in("input_ids", true, shape, ids.array()));
        inputs.add(in("attention_mask", true, shape, mask.array()));
        return new Model(group, name, dir, inputs, torchScriptGroup(group) ? List.of("last_hidden_state__0", "pooler_output__1")
                : List.of("last_hidden_state", "pooler_output"));
    }

    static In in(String name, boolean int64, long[] shape, byte[] le) {
        MemorySegment s = Arena.global().allocate(le.length, 64);
        MemorySegment.copy(le, 0, s, ValueLayout.JAVA_BYTE, 0, le.length);
        return new In(name, int64, shape, le, s);
    }

    /**
     * A Backplane repository with the zoo's model, its files linked and its config.pbtxt with our threads: {@code <name>}
     * without dynamic batching and, with {@code both}, {@code <name>_batched} with the zoo's dynamic_batching.
     */
    static Path repository(Ctx ctx, Model m, boolean both) throws IOException {
        Path repo = Files.createTempDirectory(ctx.work, "repo");
        String zooConfig = Files.readString(m.dir().resolve("config.pbtxt"));
        String threads = m.group().equals("bert_torch")
                ? param("torch_threads", ctx.threads)
                : torchScriptGroup(m.group()) ? param("INTRA_OP_THREAD_COUNT", ctx.threads) + param("INTER_OP_THREAD_COUNT", 1)
                : param("intra_op_thread_count", ctx.threads) + param("inter_op_thread_count", 1) + param("execution_mode", "SEQUENTIAL")
                        + param("graph_optimization_level", "ALL");
        for (boolean batched : both ? List.of(false, true) : List.of(false)) {
            String name = m.name() + (batched ? "_batched" : "");
            Path version = Files.createDirectories(repo.resolve(name).resolve("1"));
            try (var files = Files.list(m.versionDir())) {
                for (Path f : files.toList()) {
                    try {
                        Files.createLink(version.resolve(f.getFileName()), f);
                    } catch (IOException | UnsupportedOperationException e) {
                        Files.copy(f, version.resolve(f.getFileName())); // another file system: a copy
                    }
                }
            }
            String config = zooConfig.replaceFirst("(?m)^name:\\s*\"[^\"]*\"", "name: \"" + name + "\"");
            if (!batched) {
                config = removeBlock(config, "dynamic_batching");
            }
            Files.writeString(repo.resolve(name).resolve("config.pbtxt"), config + threads);
        }
        return repo;
    }

    static String param(String key, Object value) {
        return "parameters { key: \"" + key + "\" value: { string_value: \"" + value + "\" } }\n";
    }

    /** The text without the block {@code name { ... }} (braces matched), or unchanged where there is none. */
    static String removeBlock(String text, String name) {
        Matcher m = Pattern.compile("(?m)^\\s*" + Pattern.quote(name) + "\\s*\\{").matcher(text);
        if (!m.find()) {
            return text;
        }
        int depth = 0;
        for (int i = m.end() - 1; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '{') {
                depth++;
            } else if (c == '}' && --depth == 0) {
                return text.substring(0, m.start()) + text.substring(i + 1);
            }
        }
        throw new IllegalStateException("unbalanced braces after " + name + " in a config.pbtxt");
    }

    /** The dynamic_batching block of the zoo's config, on one line, for the configuration column. */
    static String batchingOf(Model m) throws IOException {
        String config = Files.readString(m.dir().resolve("config.pbtxt"));
        Matcher b = Pattern.compile("dynamic_batching\\s*\\{([^}]*)}").matcher(config);
        Matcher mb = Pattern.compile("max_batch_size:\\s*(\\d+)").matcher(config);
        String max = mb.find() ? "max_batch_size " + mb.group(1) : "";
        return b.find() ? "dynamic_batching {" + b.group(1).replaceAll("\\s+", " ") + "}, " + max : "no dynamic_batching in the zoo's config";
    }

    // ------------------------------------------------------------------------------ measuring

    static Result measure(Peer peer, int callers, boolean batched, Ctx ctx) throws Exception {
        AtomicBoolean measuring = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        LongAdder done = new LongAdder();
        List<long[]> lat = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        CountDownLatch warm = new CountDownLatch(callers);
        Exception[] failure = new Exception[1];
        for (int t = 0; t < callers; t++) {
            long[] samples = new long[200_000];
            lat.add(samples);
            threads.add(Thread.ofPlatform().name("real-caller-" + t).start(() -> {
                int count = 0;
                try (Caller caller = peer.caller(batched)) {
                    caller.call();
                    warm.countDown();
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        caller.call();
                        long t1 = System.nanoTime();
                        if (measuring.get() && count < samples.length - 1) {
                            samples[++count] = t1 - t0;
                            done.increment();
                        }
                    }
                } catch (Exception e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                    stop.set(true);
                    warm.countDown();
                } finally {
                    samples[0] = count;
                }
            }));
        }
        warm.await();
        Thread.sleep((long) (ctx.warmup * 1000));
        measuring.set(true);
        long start = System.nanoTime();
        Thread.sleep((long) (ctx.seconds * 1000));
        // a slow model (full ResNet-50 or BERT at 32 callers: seconds per answer) measures on until every caller could
        // have been answered once, at most 5 windows, so that a figure never rests on a handful of answers
        long cap = start + (long) (5 * ctx.seconds * 1e9);
        while (done.sum() < callers && System.nanoTime() < cap && !stop.get()) {
            Thread.sleep(20);
        }
        measuring.set(false);
        long elapsed = System.nanoTime() - start;
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        if (failure[0] != null) {
            throw failure[0];
        }
        long[] all = PeersBenchmark.latencies(lat);
        return new Result(pct(all, 0.50), pct(all, 0.99), done.sum() * 1e9 / elapsed, all.length);
    }

    private static double pct(long[] sorted, double q) {
        return sorted.length == 0 ? Double.NaN : sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))] / 1e6;
    }

    // ---------------------------------------------------------------------------- load and RSS

    /** In a child JVM of this jar: load the model in the peer, answer once, print the time and VmRSS before and after. */
    static void probe(Ctx ctx, String p, String group, long before) throws Exception {
        Model m = model(ctx, group);
        long t0 = System.nanoTime();
        try (Peer peer = start(ctx, p, m, false); Caller c = peer.caller()) {
            c.call();
            double ms = (System.nanoTime() - t0) / 1e6;
            long after = treeRssKb(ProcessHandle.current().pid());
            System.out.printf(Locale.ROOT, "PROBE %.1f %d %d%n", ms, before, after);
        }
    }

    static Load probeInChild(Ctx ctx, String p, String group) throws Exception {
        List<String> cmd = new ArrayList<>(javaCommand());
        cmd.add(RealModelsBenchmark.class.getName());
        cmd.addAll(ctx.passThrough);
        cmd.addAll(List.of("--peers", p, "--probe", p, group));
        Path log = ctx.work.resolve("probe-" + p + "-" + group + ".log");
        Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!proc.waitFor(300, TimeUnit.SECONDS)) {
            proc.destroyForcibly().waitFor();
            throw new IllegalStateException("the load probe of " + p + " on " + group + " took over 300 s");
        }
        for (String line : Files.readAllLines(log)) {
            if (line.startsWith("PROBE ")) {
                String[] f = line.split(" ");
                return new Load(Double.parseDouble(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]));
            }
        }
        throw new IllegalStateException("the load probe of " + p + " on " + group + " printed no figures: " + Files.readString(log));
    }

    /** java, its options for native access, the class path of this run. */
    static List<String> javaCommand() {
        String java = ProcessHandle.current().info().command().orElse("java");
        return List.of(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"));
    }

    /** VmRSS of a process and all its descendants, KiB. */
    static long treeRssKb(long pid) {
        long sum = rssKb(pid);
        for (ProcessHandle h : ProcessHandle.of(pid).map(ph -> ph.descendants().toList()).orElse(List.of())) {
            sum += rssKb(h.pid());
        }
        return sum;
    }

    static long rssKb(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("\\D", ""));
                }
            }
        } catch (IOException | UncheckedIOException e) {
            return 0; // gone meanwhile
        }
        return 0;
    }

    // ---------------------------------------------------------------------------- small helpers

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static String tail(Path log) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(Files.newInputStream(log), StandardCharsets.UTF_8))) {
            List<String> lines = r.lines().toList();
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 15), lines.size()));
        } catch (IOException e) {
            return "(no log at " + log + ")";
        }
    }

    static String oneOf(String option, String v, List<String> allowed) {
        if (!allowed.contains(v)) {
            throw new IllegalArgumentException(option + ": '" + v + "' is not one of " + allowed);
        }
        return v;
    }

    static List<String> listOf(String option, String v, List<String> allowed) {
        List<String> out = new ArrayList<>();
        for (String s : v.split(",")) {
            out.add(oneOf(option, s.trim(), allowed));
        }
        return out;
    }

    static int positive(String option, String v) {
        int n = Integer.parseInt(v);
        if (n < 1) {
            throw new IllegalArgumentException(option + " must be at least 1, not " + v);
        }
        return n;
    }

    static Path resource(String name, Path dir) throws IOException {
        Path target = dir.resolve(name.substring(name.lastIndexOf('/') + 1));
        try (InputStream in = RealModelsBenchmark.class.getResourceAsStream("/peers/" + name)) {
            if (in == null) {
                throw new IllegalStateException("resource /peers/" + name + " is missing from the jar");
            }
            Files.copy(in, target);
        }
        return target;
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
        try (var s = Files.walk(p)) {
            for (Path q : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        }
    }

    /** The TorchScript models of the zoo (model.pt, the pytorch backend). */
    static boolean torchScriptGroup(String group) {
        return group.endsWith("_pt");
    }

    static List<String> allPeers() {
        List<String> all = new ArrayList<>(concat(ONNX_PEERS, TORCH_PEERS));
        TORCHSCRIPT_PEERS.stream().filter(p -> !all.contains(p)).forEach(all::add);
        return all;
    }

    static List<String> concat(List<String> a, List<String> b) {
        List<String> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }
}
