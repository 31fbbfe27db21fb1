package io.backplane.dist;

import static io.backplane.dist.ServeProcess.shmFiles;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.testkit.Await;
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
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32, bounded: the real server ({@code bin/backplane serve --model-control-mode explicit})
 * loads, calls and unloads a Python and an ONNX model {@value #CYCLES} times while a steady client
 * calls a third model; no steady request fails, and threads, descriptors, child processes and
 * {@code /dev/shm} files come back to where they were after the warm-up cycles. No figure of time
 * or memory is asserted; the thousand-cycle soak with RSS, heap, classes and latency is
 * {@code tools/soak.sh} (docs/server.md, "A thousand reloads").
 */
@Timeout(300)
class ReloadCyclesTest {
    private static final Path DIST = ServeProcess.DIST;
    private static final int WARMUP = 3;
    private static final int CYCLES = 30;
    private static final String PY_BODY = "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,2,3,4]},"
            + "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[4,3,2,1]}]}";
    private static final String ONNX_BODY = "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[1,2,3,4]},"
            + "{\"name\":\"INPUT1\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[4,3,2,1]}]}";

    @TempDir
    Path dir;

    @BeforeEach
    void requirePythonAndOnnx() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/python")), "the layout has no python backend");
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/cpu")), "the layout has no cpu (ONNX Runtime) backend");
        Process p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).start();
        Assumptions.assumeTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "python3 with numpy is needed");
    }

    /** What the server holds that must come back after an unload. */
    private record Held(Map<String, Integer> threads, long fds, List<String> children, List<String> shm) {
        /** The threads, by name, of which there are more here than in {@code baseline}. */
        Map<String, Integer> moreThreadsThan(Held baseline) {
            Map<String, Integer> more = new TreeMap<>();
            threads.forEach((name, n) -> {
                if (n > baseline.threads().getOrDefault(name, 0)) {
                    more.put(name, n - baseline.threads().getOrDefault(name, 0));
                }
            });
            return more;
        }
    }

    @Test
    void serve_loadUnloadPythonAndOnnxThirtyTimes_besideASteadyClient_noFailures_resourcesBackToBaseline() throws Exception {
        Path repo = dir.resolve("repo");
        copyModel(DIST.resolve("samples/models/add_sub"), repo.resolve("steady"), "steady");
        copyModel(DIST.resolve("samples/models/add_sub"), repo.resolve("cycle_py"), "cycle_py");
        copyModel(DIST.resolve("samples/models/onnx_add_sub"), repo.resolve("cycle_onnx"), "cycle_onnx");
        Path tmp = Files.createDirectories(dir.resolve("tmp"));
        ServeProcess server = ServeProcess.in(dir, "serve").repository(repo).frontends("http").loadModels("steady").args("--exit-timeout-secs", "5")
                .env("JAVA_OPTS", "-Xmx256m -Djava.io.tmpdir=" + tmp).start();
        long pid = server.pid();
        AtomicLong steadyOk = new AtomicLong();
        List<String> steadyFailures = new ArrayList<>();
        Thread steady = null;
        var stop = new java.util.concurrent.atomic.AtomicBoolean();
        try (HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
            server.awaitStarted(Duration.ofMinutes(4));
            int port = server.port("http");

            steady = Thread.ofPlatform().name("steady-client").start(() -> {
                try (HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
                    while (!stop.get()) {
                        try {
                            HttpResponse<String> r = c.send(post(port, "/v2/models/steady/infer", PY_BODY), HttpResponse.BodyHandlers.ofString());
                            if (r.statusCode() == 200) {
                                steadyOk.incrementAndGet();
                            } else {
                                synchronized (steadyFailures) {
                                    steadyFailures.add(r.statusCode() + " " + r.body());
                                }
                            }
                        } catch (IOException e) {
                            synchronized (steadyFailures) {
                                steadyFailures.add(e.toString());
                            }
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
            });
            Await.until(() -> steadyOk.get() > 0 || !steadyFailures.isEmpty(), Duration.ofSeconds(60), "the steady client's first answer");

            // The warm-up cycles make what is made once and then kept, lazily, at the first load or call:
            // ONNX Runtime's native library and environment (loaded once, never unloaded), the admin
            // executor's thread, the cycling client's connection.
            for (int i = 0; i < WARMUP; i++) {
                cycle(client, port, "warm-up cycle " + i);
            }
            Held baseline = held(pid);
            for (int i = 1; i <= CYCLES; i++) {
                cycle(client, port, "cycle " + i);
            }
            // a stub exits, and a pool thread retires, a moment after the unload has answered
            Held[] end = {held(pid)};
            try {
                Await.until(() -> {
                    end[0] = held(pid);
                    return end[0].moreThreadsThan(baseline).isEmpty() && end[0].fds() <= baseline.fds()
                            && end[0].children().size() <= baseline.children().size() && end[0].shm().size() <= baseline.shm().size();
                }, Duration.ofSeconds(30), "threads, descriptors, children and shm files back to the baseline");
            } catch (AssertionError e) {
                throw new AssertionError(e.getMessage() + ":\nbaseline " + baseline + "\nend      " + end[0] + "\nthreads more than at the baseline "
                        + end[0].moreThreadsThan(baseline), e);
            }
            System.out.println("[reload] " + CYCLES + " cycles; baseline " + baseline + "; end " + end[0] + "; steady ok " + steadyOk.get());
            stop.set(true);
            steady.join(TimeUnit.SECONDS.toMillis(60));
            assertEquals(List.of(), steadyFailures, "failed steady requests");
            assertTrue(steadyOk.get() > 0);
            assertEquals(Map.of(), end[0].moreThreadsThan(baseline), "threads more than at the baseline, by name");
            assertEquals(baseline.children(), end[0].children(), "child processes");
            assertEquals(baseline.shm(), end[0].shm(), "/dev/shm files");

            server.signal("TERM", false);
            assertEquals(0, server.awaitExit(), server.output());
            assertEquals(List.of(), shmFiles(pid), "shm files left after exit");
            assertEquals(List.of(), names(tmp), "temporary files left after exit");
        } finally {
            stop.set(true);
            if (steady != null) {
                steady.interrupt();
                steady.join(TimeUnit.SECONDS.toMillis(60));
            }
            server.close();
        }
    }

    /** Load both, call each once, unload both: every step answers 200. */
    private static void cycle(HttpClient client, int port, String which) throws Exception {
        for (String[] step : new String[][] {{"/v2/repository/models/cycle_py/load", ""}, {"/v2/repository/models/cycle_onnx/load", ""},
                {"/v2/models/cycle_py/infer", PY_BODY}, {"/v2/models/cycle_onnx/infer", ONNX_BODY},
                {"/v2/repository/models/cycle_py/unload", ""}, {"/v2/repository/models/cycle_onnx/unload", ""}}) {
            HttpResponse<String> r = client.send(post(port, step[0], step[1]), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), which + ": " + step[0] + " answered " + r.body());
        }
    }

    private static HttpRequest post(int port, String path, String body) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(120))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
    }

    /**
     * Threads by name (from {@code jcmd PID Thread.print}, digits folded to {@code #} so that the
     * threads of one pool count together), less the JVM's own JIT compiler and GC workers, whose
     * number the JVM changes with its load (dynamic compiler and GC threads), and less the HTTP
     * frontend's admin pool (a cached pool that runs repository calls: a thread retires after 60 s
     * idle, and one more starts when a call arrives while the last one is still handing back its
     * answer); descriptors; descendants (stubs, their template, grandchildren included); the
     * server's shm files.
     */
    private static Held held(long pid) {
        Map<String, Integer> threads = new TreeMap<>();
        for (String name : threadNames(pid)) {
            if (!name.startsWith("C1 CompilerThread") && !name.startsWith("C2 CompilerThread") && !name.startsWith("GC Thread") && !name.startsWith("G1 ")
                    && !name.startsWith("backplane-http-admin-")) {
                threads.merge(name, 1, Integer::sum);
            }
        }
        long fds;
        try (Stream<Path> f = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
            fds = f.count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<String> children = ProcessHandle.of(pid).map(h -> h.descendants().map(d -> d.info().command().orElse("?")).sorted().toList())
                .orElse(List.of());
        return new Held(threads, fds, children, shmFiles(pid));
    }

    private static final Pattern THREAD = Pattern.compile("^\"([^\"]*)\"", Pattern.MULTILINE);

    private static List<String> threadNames(long pid) {
        try {
            Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(), Long.toString(pid), "Thread.print")
                    .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "jcmd " + pid + " Thread.print: " + out);
            List<String> names = new ArrayList<>();
            Matcher m = THREAD.matcher(out);
            while (m.find()) {
                names.add(m.group(1).replaceAll("[0-9]+", "#"));
            }
            return names;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", e);
        }
    }

    private static void copyModel(Path from, Path to, String name) throws IOException {
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

    private static List<String> names(Path d) throws IOException {
        try (Stream<Path> f = Files.list(d)) {
            return f.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }
}
