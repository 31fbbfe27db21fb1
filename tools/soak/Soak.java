import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A thousand reloads (issue 32): starts {@code backplane serve --model-control-mode explicit} on a
 * temporary repository (a steady Python model and two cycled models, a Python one and an ONNX one,
 * copied from the samples), keeps a steady client on the steady model for the whole run, loads,
 * calls once and unloads both cycled models N times, and prints what the server holds at the
 * baseline (after the warm-up cycles), after the checkpoint cycle (100) and at the end: RSS, heap
 * after a full GC, threads, descriptors, loaded classes, class loaders (plugin ones apart), child
 * processes (stubs and their template, grandchildren included), /dev/shm files, and the steady
 * model's p50/p99 over the first and the last 100 cycles. Exit code 0 when every goal is met, 1
 * when one is missed, 2 on a usage or start-up error.
 *
 * <p>Run it with {@code tools/soak.sh [options]} (which finds the JDK); {@code --help} lists the
 * options. A JDK tool, with no dependencies: it reads {@code /proc} and asks {@code jcmd}.
 */
public final class Soak {
    private static final Pattern SERVING = Pattern.compile("frontend 'http' serving at \\S+:(\\d+)");
    private static final String PY_BODY = "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,2,3,4]},"
            + "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[4,3,2,1]}]}";
    private static final String ONNX_BODY = "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[1,2,3,4]},"
            + "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[4,3,2,1]}]}";

    // options
    int cycles = 1000;
    int warmup = 10;
    int checkpoint = 100;
    int steadyThreads = 2;
    int every = 50;
    Path launcher = Path.of("dist/target/backplane/bin/backplane");
    Path samples;
    String javaOpts = "";
    boolean nmt;
    double rssGoal = 0.10;

    Path dir;
    Process server;
    long pid;
    int port;
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build();
    volatile int cycle; // the cycle now running, for the steady client's latencies (0 = warm-up)
    volatile boolean stop;
    final AtomicLong steadyOk = new AtomicLong();
    final AtomicLong steadyFailed = new AtomicLong();
    final List<String> steadyFailures = new ArrayList<>();
    final List<long[]> latencies = new ArrayList<>(); // per steady thread: {cycle, nanos, cycle, nanos, ...}, read after join

    public static void main(String[] args) throws Exception {
        Soak s = new Soak();
        try {
            s.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("soak: " + e.getMessage() + "; try --help");
            System.exit(2);
        }
        int code;
        try {
            code = s.run();
        } catch (StartException e) {
            System.err.println("soak: " + e.getMessage());
            code = 2;
        } finally {
            s.stopServer();
        }
        System.exit(code);
    }

    static final class StartException extends Exception {
        private static final long serialVersionUID = 1L;

        StartException(String message) {
            super(message);
        }
    }

    void parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = a.contains("=") ? a.substring(a.indexOf('=') + 1) : null;
            String name = a.contains("=") ? a.substring(0, a.indexOf('=')) : a;
            if (name.equals("--help") || name.equals("-h")) {
                System.out.println("""
                        tools/soak.sh [options]: load and unload a Python and an ONNX model many times beside a steady client; print before/after.
                          --cycles=N           load/unload cycles after the warm-up (default 1000)
                          --warmup=N           cycles before the baseline sample (default 10): what is made once, lazily, is made there
                          --checkpoint=N       the cycle after which RSS, heap and classes are the reference for the end (default 100)
                          --steady-threads=N   steady client threads (default 2)
                          --every=N            print a progress line every N cycles (default 50)
                          --backplane=PATH     the launcher (default dist/target/backplane/bin/backplane)
                          --samples=DIR        where add_sub and onnx_add_sub are (default: the distribution's samples/models)
                          --java-opts=OPTS     JAVA_OPTS for the server (default: none)
                          --nmt                start the server with -XX:NativeMemoryTracking=summary and print the native memory diff
                          --rss-goal=F         allowed RSS growth from the checkpoint to the end (default 0.10)
                        Exit code: 0 every goal met, 1 a goal missed, 2 usage or start-up error.""");
                System.exit(0);
            }
            if (v == null && !name.equals("--nmt")) {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException("option " + name + " needs a value");
                }
                v = args[++i];
            }
            switch (name) {
                case "--cycles" -> cycles = positive(name, v);
                case "--warmup" -> warmup = positive(name, v);
                case "--checkpoint" -> checkpoint = positive(name, v);
                case "--steady-threads" -> steadyThreads = positive(name, v);
                case "--every" -> every = positive(name, v);
                case "--backplane" -> launcher = Path.of(v);
                case "--samples" -> samples = Path.of(v);
                case "--java-opts" -> javaOpts = v;
                case "--nmt" -> nmt = true;
                case "--rss-goal" -> rssGoal = Double.parseDouble(v);
                default -> throw new IllegalArgumentException("unknown option '" + a + "'");
            }
        }
        checkpoint = Math.min(checkpoint, cycles);
        if (!Files.isExecutable(launcher)) {
            throw new IllegalArgumentException("no launcher at " + launcher.toAbsolutePath()
                    + ": build the distribution (./mvnw -q -B -pl dist -am -DskipTests package) or pass --backplane=PATH");
        }
        if (samples == null) {
            samples = launcher.toAbsolutePath().getParent().getParent().resolve("samples/models");
        }
        for (String m : List.of("add_sub", "onnx_add_sub")) {
            if (!Files.isDirectory(samples.resolve(m))) {
                throw new IllegalArgumentException("no sample model " + m + " in " + samples.toAbsolutePath() + ": pass --samples=DIR");
            }
        }
    }

    private static int positive(String name, String v) {
        int n;
        try {
            n = Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be a whole number, not '" + v + "'");
        }
        if (n < 1) {
            throw new IllegalArgumentException(name + " must be at least 1, not " + n);
        }
        return n;
    }

    // ---- the run ----

    int run() throws Exception {
        dir = Files.createTempDirectory("backplane-soak-");
        Path repo = dir.resolve("repo");
        copyModel(samples.resolve("add_sub"), repo.resolve("steady"), "steady");
        copyModel(samples.resolve("add_sub"), repo.resolve("cycle_py"), "cycle_py");
        copyModel(samples.resolve("onnx_add_sub"), repo.resolve("cycle_onnx"), "cycle_onnx");
        startServer(repo);
        System.out.printf("soak: server pid %d on port %d, %d warm-up + %d cycles, %d steady thread(s), load average %s%n", pid, port, warmup, cycles,
                steadyThreads, loadavg());

        List<Thread> steady = new ArrayList<>();
        for (int t = 0; t < steadyThreads; t++) {
            long[][] mine = {new long[1 << 16]};
            int[] n = {0};
            steady.add(Thread.ofPlatform().name("steady-" + t).start(() -> {
                HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
                HttpRequest req = post("/v2/models/steady/infer", PY_BODY);
                while (!stop) {
                    int at = cycle;
                    long t0 = System.nanoTime();
                    String failure = null;
                    try {
                        HttpResponse<String> r = c.send(req, HttpResponse.BodyHandlers.ofString());
                        if (r.statusCode() != 200) {
                            failure = r.statusCode() + " " + r.body();
                        }
                    } catch (IOException e) {
                        failure = e.toString();
                    } catch (InterruptedException e) {
                        return;
                    }
                    long took = System.nanoTime() - t0;
                    if (failure != null) {
                        steadyFailed.incrementAndGet();
                        synchronized (steadyFailures) {
                            if (steadyFailures.size() < 10) {
                                steadyFailures.add("cycle " + at + ": " + failure);
                            }
                        }
                        continue;
                    }
                    steadyOk.incrementAndGet();
                    if (n[0] + 2 > mine[0].length) {
                        mine[0] = Arrays.copyOf(mine[0], mine[0].length * 2);
                    }
                    mine[0][n[0]++] = at;
                    mine[0][n[0]++] = took;
                }
                synchronized (latencies) {
                    latencies.add(Arrays.copyOf(mine[0], n[0]));
                }
            }));
        }

        long t0 = System.nanoTime();
        int cycleFailures = 0;
        for (int i = 1; i <= warmup; i++) {
            cycleFailures += cycleOnce(-i);
        }
        if (nmt) {
            jcmd("VM.native_memory", "baseline");
        }
        Sample baseline = sample("baseline (after " + warmup + " warm-up cycles)", null);
        Sample atCheckpoint = null;
        long start = System.nanoTime();
        for (int i = 1; i <= cycles; i++) {
            cycle = i;
            cycleFailures += cycleOnce(i);
            if (i == checkpoint) {
                atCheckpoint = sample("after cycle " + i, baseline);
            }
            if (i % every == 0) {
                System.out.printf("  cycle %5d  %6.1f s  rss %4d MiB  threads %3d  fds %3d  children %d  shm %d  steady ok %d failed %d%n", i,
                        (System.nanoTime() - start) / 1e9, rssKib() / 1024, threads(), fds(), children(), shmFiles(), steadyOk.get(), steadyFailed.get());
            }
        }
        Sample end = sample("end (after cycle " + cycles + ")", baseline);
        String nmtDiff = nmt ? jcmd("VM.native_memory", "summary.diff", "scale=KB") : null;
        stop = true;
        for (Thread t : steady) {
            t.join(TimeUnit.MINUTES.toMillis(2));
        }
        System.out.printf("soak: %d cycles in %.0f s (%.0f ms a cycle), load average %s%n", cycles, (System.nanoTime() - start) / 1e9,
                (System.nanoTime() - start) / 1e6 / cycles, loadavg());
        return report(baseline, atCheckpoint, end, cycleFailures, nmtDiff, (System.nanoTime() - t0) / 1e9);
    }

    /** Loads both cycled models, calls each once, unloads both; the number of steps that failed (each printed). */
    int cycleOnce(int i) {
        int failed = 0;
        for (String[] step : new String[][] {{"/v2/repository/models/cycle_py/load", ""}, {"/v2/repository/models/cycle_onnx/load", ""},
                {"/v2/models/cycle_py/infer", PY_BODY}, {"/v2/models/cycle_onnx/infer", ONNX_BODY},
                {"/v2/repository/models/cycle_py/unload", ""}, {"/v2/repository/models/cycle_onnx/unload", ""}}) {
            try {
                HttpResponse<String> r = client.send(post(step[0], step[1]), HttpResponse.BodyHandlers.ofString());
                if (r.statusCode() != 200) {
                    failed++;
                    System.out.println("  cycle " + i + ": " + step[0] + " answered " + r.statusCode() + " " + r.body());
                }
            } catch (IOException e) {
                failed++;
                System.out.println("  cycle " + i + ": " + step[0] + " failed: " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }
        return failed;
    }

    HttpRequest post(String path, String body) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(120))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
    }

    // ---- the server ----

    void copyModel(Path from, Path to, String name) throws IOException {
        try (Stream<Path> files = Files.walk(from)) {
            for (Path f : files.toList()) {
                Path t = to.resolve(from.relativize(f).toString());
                if (Files.isDirectory(f)) {
                    Files.createDirectories(t);
                } else if (f.getFileName().toString().equals("config.pbtxt")) {
                    Files.writeString(t, Files.readString(f).replaceFirst("(?m)^name: \"[^\"]*\"", "name: \"" + name + "\""));
                } else {
                    Files.copy(f, t);
                }
            }
        }
    }

    void startServer(Path repo) throws Exception {
        Path log = dir.resolve("serve.log");
        ProcessBuilder pb = new ProcessBuilder(launcher.toAbsolutePath().toString(), "serve", "--model-repository", repo.toString(),
                "--model-control-mode", "explicit", "--load-model", "steady", "--http-port", "0", "--http-address", "127.0.0.1", "--grpc-port", "-1",
                "--metrics-port", "-1", "--openai-port", "-1").redirectErrorStream(true).redirectOutput(log.toFile());
        String opts = (javaOpts + (nmt ? " -XX:NativeMemoryTracking=summary" : "")).trim();
        if (!opts.isEmpty()) {
            pb.environment().put("JAVA_OPTS", opts);
        }
        server = pb.start();
        pid = server.pid(); // bin/backplane execs the JVM
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(4);
        while (true) {
            String out = Files.readString(log);
            Matcher m = SERVING.matcher(out);
            if (out.contains(" started in ") && m.find()) {
                port = Integer.parseInt(m.group(1));
                return;
            }
            if (!server.isAlive() || System.nanoTime() > deadline) {
                throw new StartException("serve did not start (" + (server.isAlive() ? "4 minutes" : "exit code " + server.exitValue()) + "); its log, "
                        + log + ":\n" + out);
            }
            Thread.sleep(100);
        }
    }

    void stopServer() {
        stop = true;
        if (server != null && server.isAlive()) {
            server.destroy();
            try {
                if (!server.waitFor(60, TimeUnit.SECONDS)) {
                    server.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (server != null && !server.isAlive() && server.exitValue() == 0 && dir != null) {
            try (Stream<Path> files = Files.walk(dir)) {
                files.sorted((a, b) -> b.getNameCount() - a.getNameCount()).forEach(p -> p.toFile().delete());
            } catch (IOException e) {
                System.err.println("soak: could not delete " + dir + ": " + e);
            }
        } else if (dir != null) {
            System.err.println("soak: the server did not exit cleanly; its log and repository are kept in " + dir);
        }
    }

    // ---- what the server holds ----

    record Sample(String label, long rssKib, long heapAfterGcKib, long threads, long fds, long classes, long loaders, long pluginLoaders, long children,
            long shm, Map<String, Integer> threadNames, Map<String, long[]> histogram) {
        /** Threads less those {@link #elasticThread} names. */
        long serverThreads() {
            return threadNames.entrySet().stream().filter(e -> !elasticThread(e.getKey())).mapToLong(Map.Entry::getValue).sum();
        }
    }

    /**
     * The JVM's JIT compiler and GC workers, whose number the JVM changes with its load, and the
     * HTTP frontend's admin pool (a cached pool for repository calls: a thread retires after 60 s
     * idle, and one more starts when a call arrives while the last is still handing back its answer).
     */
    static boolean elasticThread(String threadName) {
        return threadName.startsWith("C1 CompilerThread") || threadName.startsWith("C2 CompilerThread") || threadName.startsWith("GC Thread")
                || threadName.startsWith("G1 ") || threadName.startsWith("backplane-http-admin-");
    }

    /** Thread names (digits folded to #) and how many threads have each, from jcmd Thread.print. */
    Map<String, Integer> threadNames() {
        Map<String, Integer> names = new java.util.TreeMap<>();
        try {
            Matcher m = Pattern.compile("^\"([^\"]*)\"", Pattern.MULTILINE).matcher(jcmd("Thread.print"));
            while (m.find()) {
                names.merge(m.group(1).replaceAll("[0-9]+", "#"), 1, Integer::sum);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        return names;
    }

    /** Live objects by class, {instances, bytes}, from jcmd GC.class_histogram (which runs a full GC first). */
    Map<String, long[]> histogram() throws Exception {
        Map<String, long[]> h = new java.util.HashMap<>();
        Pattern row = Pattern.compile("^\\s*\\d+:\\s+(\\d+)\\s+(\\d+)\\s+(\\S+)");
        for (String line : jcmd("GC.class_histogram").split("\n")) {
            Matcher m = row.matcher(line);
            if (m.find()) {
                h.merge(m.group(3), new long[] {Long.parseLong(m.group(1)), Long.parseLong(m.group(2))}, (a, b) -> new long[] {a[0] + b[0], a[1] + b[1]});
            }
        }
        return h;
    }

    /**
     * Everything, after a full GC. The counts that must come back to the baseline (threads,
     * descriptors, children, shm files) are given up to 30 s to get there: a stub exits, and a
     * pool thread retires, a moment after the unload answered.
     */
    Sample sample(String label, Sample baseline) throws Exception {
        if (baseline != null) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (System.nanoTime() < deadline && (serverThreads() > baseline.serverThreads() || fds() > baseline.fds() || children() > baseline.children()
                    || shmFiles() > baseline.shm())) {
                Thread.sleep(200);
            }
        }
        Map<String, long[]> histogram = histogram(); // a full GC first
        Matcher used = Pattern.compile("used (\\d+)K").matcher(jcmd("GC.heap_info"));
        long heap = used.find() ? Long.parseLong(used.group(1)) : -1;
        Map<String, Long> perf = new LinkedHashMap<>();
        for (String line : jcmd("PerfCounter.print").split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0 && line.startsWith("java.cls.")) {
                perf.put(line.substring(0, eq), Long.parseLong(line.substring(eq + 1).replaceAll("[^0-9]", "")));
            }
        }
        long classes = perf.getOrDefault("java.cls.loadedClasses", 0L) + perf.getOrDefault("java.cls.sharedLoadedClasses", 0L)
                - perf.getOrDefault("java.cls.unloadedClasses", 0L) - perf.getOrDefault("java.cls.sharedUnloadedClasses", 0L);
        long loaders = 0;
        long plugin = 0;
        for (String line : jcmd("VM.classloader_stats").split("\n")) {
            if (line.matches("^0x[0-9a-f]+\\s+.*")) {
                loaders++;
                if (line.contains("io.backplane.core.plugin.PluginClassLoader")) {
                    plugin++;
                }
            }
        }
        return new Sample(label, rssKib(), heap, threads(), fds(), classes, loaders, plugin, children(), shmFiles(), threadNames(), histogram);
    }

    String jcmd(String... command) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(), Long.toString(pid)));
        cmd.addAll(List.of(command));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(2, TimeUnit.MINUTES) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed:\n" + out);
        }
        return out;
    }

    long status(String field) {
        try {
            for (String l : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
                if (l.startsWith(field + ":")) {
                    return Long.parseLong(l.replaceAll("[^0-9]", ""));
                }
            }
            return -1;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    long rssKib() {
        return status("VmRSS");
    }

    long threads() {
        return status("Threads");
    }

    long serverThreads() {
        return threadNames().entrySet().stream().filter(e -> !elasticThread(e.getKey())).mapToLong(Map.Entry::getValue).sum();
    }

    long fds() {
        try (Stream<Path> f = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
            return f.count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    long children() {
        return ProcessHandle.of(pid).map(h -> h.descendants().count()).orElse(0L);
    }

    long shmFiles() {
        try (Stream<Path> f = Files.list(Path.of("/dev/shm"))) {
            return f.filter(p -> p.getFileName().toString().startsWith("backplane-" + pid + "-")).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String loadavg() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "?";
        }
    }

    // ---- the report ----

    /** p50 and p99 (ms) of the steady requests that started during cycles [from, to]; {-1, -1, 0} when none. */
    double[] percentiles(int from, int to) {
        List<Long> xs = new ArrayList<>();
        for (long[] l : latencies) {
            for (int i = 0; i + 1 < l.length; i += 2) {
                if (l[i] >= from && l[i] <= to) {
                    xs.add(l[i + 1]);
                }
            }
        }
        if (xs.isEmpty()) {
            return new double[] {-1, -1, 0};
        }
        long[] a = xs.stream().mapToLong(Long::longValue).sorted().toArray();
        return new double[] {a[(int) Math.min(a.length - 1, Math.round(0.50 * (a.length - 1)))] / 1e6,
                a[(int) Math.min(a.length - 1, Math.round(0.99 * (a.length - 1)))] / 1e6, a.length};
    }

    int report(Sample base, Sample mid, Sample end, int cycleFailures, String nmtDiff, double seconds) {
        List<String> missed = new ArrayList<>();
        System.out.println();
        System.out.printf(Locale.ROOT, "%-28s %14s %14s %14s %10s %10s%n", "", "baseline", "cycle " + checkpoint, "end", "end/base", "end/" + checkpoint);
        row("RSS (MiB)", base.rssKib() / 1024.0, mid.rssKib() / 1024.0, end.rssKib() / 1024.0);
        row("heap after GC (MiB)", base.heapAfterGcKib() / 1024.0, mid.heapAfterGcKib() / 1024.0, end.heapAfterGcKib() / 1024.0);
        row("threads", base.threads(), mid.threads(), end.threads());
        row("  less JIT, GC, admin pools", base.serverThreads(), mid.serverThreads(), end.serverThreads());
        row("file descriptors", base.fds(), mid.fds(), end.fds());
        row("loaded classes", base.classes(), mid.classes(), end.classes());
        row("class loaders", base.loaders(), mid.loaders(), end.loaders());
        row("plugin class loaders", base.pluginLoaders(), mid.pluginLoaders(), end.pluginLoaders());
        row("child processes", base.children(), mid.children(), end.children());
        row("/dev/shm files", base.shm(), mid.shm(), end.shm());
        int k = checkpoint;
        double[] early = percentiles(1, k);
        double[] late = percentiles(Math.max(1, cycles - k + 1), cycles);
        System.out.printf(Locale.ROOT, "steady p50 (ms), cycles 1-%d vs %d-%d: %.2f -> %.2f (x%.2f); p99: %.2f -> %.2f (x%.2f); %d and %d requests%n", k,
                Math.max(1, cycles - k + 1), cycles, early[0], late[0], late[0] / early[0], early[1], late[1], late[1] / early[1], (long) early[2],
                (long) late[2]);
        System.out.printf("steady requests: %d ok, %d failed; cycle steps failed: %d; %.0f s in all%n", steadyOk.get(), steadyFailed.get(), cycleFailures,
                seconds);
        steadyFailures.forEach(f -> System.out.println("  steady failure: " + f));
        Map<String, Integer> moreThreads = new java.util.TreeMap<>();
        end.threadNames().forEach((name, n) -> {
            if (n > base.threadNames().getOrDefault(name, 0)) {
                moreThreads.put(name, n - base.threadNames().getOrDefault(name, 0));
            }
        });
        System.out.println("threads more at the end than at the baseline, by name: " + moreThreads);
        System.out.println("live objects that grew most from cycle " + k + " to the end (jcmd GC.class_histogram), bytes and instances:");
        mid.histogram().keySet().stream().filter(end.histogram()::containsKey).map(c -> Map.entry(c, end.histogram().get(c)[1] - mid.histogram().get(c)[1]))
                .sorted((a, b) -> Long.compare(b.getValue(), a.getValue())).limit(8).forEach(e -> System.out.printf(Locale.ROOT, "  %+10d B %+8d  %s%n",
                        e.getValue(), end.histogram().get(e.getKey())[0] - mid.histogram().get(e.getKey())[0], e.getKey()));
        end.histogram().keySet().stream().filter(c -> !mid.histogram().containsKey(c)).map(c -> Map.entry(c, end.histogram().get(c)[1]))
                .sorted((a, b) -> Long.compare(b.getValue(), a.getValue())).limit(4)
                .forEach(e -> System.out.printf(Locale.ROOT, "  %+10d B (new class)  %s%n", e.getValue(), e.getKey()));
        if (nmtDiff != null) {
            System.out.println("native memory, end against baseline (jcmd VM.native_memory summary.diff):");
            nmtDiff.lines().filter(l -> (l.contains("(") || l.startsWith("Total")) && l.contains("committed=")).forEach(l -> System.out.println("  " + l.strip()));
        }

        if (end.rssKib() > mid.rssKib() * (1 + rssGoal)) {
            missed.add(String.format(Locale.ROOT, "RSS grew %.1f%% from cycle %d to the end (goal: at most %.0f%%)",
                    100.0 * (end.rssKib() - mid.rssKib()) / mid.rssKib(), k, rssGoal * 100));
        }
        if (end.heapAfterGcKib() > mid.heapAfterGcKib() * (1 + rssGoal)) {
            missed.add(String.format(Locale.ROOT, "heap after GC grew %.1f%% from cycle %d to the end (goal: at most %.0f%%)",
                    100.0 * (end.heapAfterGcKib() - mid.heapAfterGcKib()) / mid.heapAfterGcKib(), k, rssGoal * 100));
        }
        if (end.classes() > mid.classes() * 1.02) {
            missed.add("loaded classes grew from " + mid.classes() + " at cycle " + k + " to " + end.classes() + " (goal: within 2%)");
        }
        backToBase(missed, "threads (less JIT, GC, admin pools)", base.serverThreads(), end.serverThreads());
        backToBase(missed, "file descriptors", base.fds(), end.fds());
        backToBase(missed, "class loaders", base.loaders(), end.loaders());
        backToBase(missed, "plugin class loaders", base.pluginLoaders(), end.pluginLoaders());
        backToBase(missed, "child processes", base.children(), end.children());
        backToBase(missed, "/dev/shm files", base.shm(), end.shm());
        if (steadyFailed.get() > 0) {
            missed.add(steadyFailed.get() + " steady request(s) failed (goal: none)");
        }
        if (cycleFailures > 0) {
            missed.add(cycleFailures + " load/infer/unload step(s) failed (goal: none)");
        }
        if (late[0] > early[0] * 1.5) {
            missed.add(String.format(Locale.ROOT, "steady p50 went from %.2f ms to %.2f ms (goal: within x1.5; noisy on a busy machine)", early[0], late[0]));
        }
        System.out.println();
        if (missed.isEmpty()) {
            System.out.println("soak: every goal met");
            return 0;
        }
        missed.forEach(m -> System.out.println("soak: MISSED: " + m));
        return 1;
    }

    static void row(String name, double base, double mid, double end) {
        System.out.printf(Locale.ROOT, "%-28s %14.1f %14.1f %14.1f %10.3f %10.3f%n", name, base, mid, end, end / base, end / mid);
    }

    static void backToBase(List<String> missed, String what, long base, long end) {
        if (end > base) {
            missed.add(what + ": " + end + " at the end, " + base + " at the baseline (goal: back to the baseline)");
        }
    }
}
