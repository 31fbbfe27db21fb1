package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.testkit.Await;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Runs the packaged launcher, dist/target/backplane/bin/backplane, as a user would (bound to
 * the integration-test phase, after the layout is assembled).
 */
class LayoutTest {
    private static final Path DIST = Path.of(System.getProperty("backplane.dist", "target/backplane")).toAbsolutePath().normalize();
    private static final Path LAUNCHER = DIST.resolve("bin/backplane");
    private static final Pattern SERVING = Pattern.compile("frontend '([^']+)' serving at (\\S+)");

    @TempDir
    Path dir;

    private record Result(int code, String output) {
    }

    private ProcessBuilder launcher(String... args) {
        return launcherIn(dir, args);
    }

    private ProcessBuilder launcherIn(Path workingDirectory, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(LAUNCHER.toString());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(workingDirectory.toFile()).redirectErrorStream(true).redirectOutput(dir.resolve("out.log").toFile());
        // a private temp folder, to check that the server leaves nothing behind
        pb.environment().put("JAVA_OPTS", "-Djava.io.tmpdir=" + tmp());
        return pb;
    }

    private Path tmp() {
        Path t = dir.resolve("tmp");
        try {
            Files.createDirectories(t);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return t;
    }

    private String output() throws IOException {
        return Files.readString(dir.resolve("out.log"));
    }

    private Result run(String... args) throws Exception {
        Process p = launcher(args).start();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            fail("bin/backplane " + List.of(args) + " did not finish:\n" + output());
        }
        return new Result(p.exitValue(), output());
    }

    @Test
    void layout_hasLauncherClassPathAndSamples() throws IOException {
        assertTrue(Files.isExecutable(LAUNCHER), LAUNCHER + " is not executable");
        assertTrue(Files.isRegularFile(DIST.resolve("bin/find-jdk.sh")));
        assertTrue(Files.isRegularFile(DIST.resolve("conf/logback.xml")));
        assertTrue(Files.isRegularFile(DIST.resolve("samples/models/add_sub/config.pbtxt")));
        assertTrue(Files.isRegularFile(DIST.resolve("samples/models/repeat_decoupled/1/model.py")));
        List<String> lib = names(DIST.resolve("lib"));
        for (String prefix : List.of("backplane-server-", "backplane-core-", "backplane-protocol-", "backplane-spi-", "picocli-", "slf4j-api-", "logback-classic-")) {
            assertTrue(lib.stream().anyMatch(n -> n.startsWith(prefix)), prefix + "* missing from lib: " + lib);
        }
        assertFalse(lib.stream().anyMatch(n -> n.startsWith("backplane-backend-")), "backends belong in backends/, not lib/: " + lib);
        Path backends = DIST.resolve("backends");
        if (Files.isDirectory(backends)) {
            try (Stream<Path> s = Files.list(backends)) {
                for (Path b : s.toList()) {
                    List<String> jars = names(b);
                    assertTrue(jars.stream().anyMatch(n -> n.startsWith("backplane-backend-")), b + " has no backend jar: " + jars);
                    assertFalse(jars.stream().anyMatch(n -> n.startsWith("backplane-spi-") || n.startsWith("slf4j-") || n.startsWith("logback-")),
                            b + " must take the SPI and logging from the host: " + jars);
                }
            }
        }
    }

    /**
     * backends/pytorch/ is the TorchScript backend's packaged plugin directory as it is: the jars its
     * lib/ holds, no more and no fewer (DJL's commons-compress, -io and -codec included), so what
     * the conformance kit proved on backends/torch/target/plugin/pytorch/ is what the server loads.
     */
    @Test
    void pytorch_holdsExactlyThePackagedPluginDirectory() throws IOException {
        holdsExactlyThePackagedPluginDirectory("backends/torch/target/plugin/pytorch", "backends/pytorch",
                List.of("commons-compress-", "commons-io-", "commons-codec-", "pytorch-jni-", "pytorch-native-cpu-"));
    }

    @Test
    void fil_holdsExactlyThePackagedPluginDirectory() throws IOException {
        holdsExactlyThePackagedPluginDirectory("backends/fil/target/plugin/fil", "backends/fil", List.of("xgboost4j_", "lightgbm4j-", "kryo-"));
    }

    private static void holdsExactlyThePackagedPluginDirectory(String packagedDir, String servedDir, List<String> needed) throws IOException {
        Path packaged = Path.of(System.getProperty("backplane.repo", "..")).resolve(packagedDir).toAbsolutePath().normalize();
        assertTrue(Files.isDirectory(packaged.resolve("lib")), "the backend is packaged before dist (-pl dist -am): " + packaged);
        Path served = DIST.resolve(servedDir);
        assertTrue(Files.isDirectory(served.resolve("lib")), "dist has no " + servedDir + "/lib: " + served);
        assertEquals(names(packaged), names(served), servedDir + "/ differs from " + packaged);
        List<String> lib = names(packaged.resolve("lib"));
        assertEquals(lib, names(served.resolve("lib")), servedDir + "/lib differs from " + packaged.resolve("lib"));
        for (String prefix : needed) {
            assertTrue(lib.stream().anyMatch(n -> n.startsWith(prefix)), prefix + "* missing from " + served.resolve("lib") + ": " + lib);
        }
        assertFalse(lib.stream().anyMatch(n -> n.startsWith("backplane-spi-") || n.startsWith("slf4j-") || n.startsWith("logback-")),
                servedDir + "/lib must take the SPI and logging from the host: " + lib);
    }

    private static List<String> names(Path d) throws IOException {
        try (Stream<Path> s = Files.list(d)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void launcher_help_listsCommands() throws Exception {
        Result r = run("--help");
        assertEquals(0, r.code(), r.output());
        assertTrue(r.output().contains("serve") && r.output().contains("bench"), r.output());
        Result serve = run("serve", "--help");
        assertEquals(0, serve.code(), serve.output());
        assertTrue(serve.output().contains("--model-repository"), serve.output());
    }

    @Test
    void launcher_badOption_exitCode2_namesOption() throws Exception {
        Result r = run("serve", "--http-port", "eighty");
        assertEquals(2, r.code(), r.output());
        assertTrue(r.output().contains("Invalid value for option '--http-port': 'eighty' is not a port number"), r.output());
    }

    @Test
    void launcher_noJava25_saysSo() throws Exception {
        ProcessBuilder pb = launcher("--help");
        pb.environment().put("BACKPLANE_JDK", "/nonexistent");
        pb.environment().put("JAVA_HOME", "/nonexistent");
        pb.environment().put("PATH", "/usr/bin:/bin");
        pb.environment().put("HOME", dir.toString());
        Process p = pb.start();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS));
        // on a machine with a JDK 25 under /usr/lib/jvm it is still found; otherwise a clear message
        assertTrue(p.exitValue() == 0 || output().contains("needs Java 25 or newer"), output());
    }

    @Test
    void bench_withoutLoadTool_clearError_orDelegates() throws Exception {
        boolean installed = names(DIST.resolve("lib")).stream().anyMatch(n -> n.startsWith("backplane-bench-"));
        if (installed) {
            return; // its behaviour is the tool's own; covered in tools/bench
        }
        Result r = run("bench", "--duration", "1");
        assertEquals(1, r.code(), r.output());
        assertTrue(r.output().contains("the load tool (io.backplane.bench.Bench, module tools/bench) is not installed"), r.output());
    }

    @Test
    void serve_port0_logsEndpoints_sigtermDrainsAndLeavesNothing() throws Exception {
        Path repo = Files.createDirectories(dir.resolve("repo"));
        Process p = launcher("serve", "--model-repository", repo.toString(), "--model-control-mode", "explicit", "--http-port", "0", "--grpc-port", "0",
                "--metrics-port", "0", "--openai-port", "-1", "--exit-timeout-secs", "5", "--log-verbose").start();
        try {
            awaitStarted(p);
            String out = output();
            assertTrue(out.contains("DEBUG"), "--log-verbose shows debug lines:\n" + out);
            Map<String, String> endpoints = new LinkedHashMap<>();
            Matcher m = SERVING.matcher(out);
            while (m.find()) {
                endpoints.put(m.group(1), m.group(2));
            }
            for (String e : endpoints.values()) {
                assertFalse(e.endsWith(":0"), "a bound port is logged, not 0: " + endpoints);
            }
            String http = endpoints.get("http");
            if (http != null) {
                try (HttpClient client = HttpClient.newHttpClient()) {
                    URI live = URI.create(http.replace("0.0.0.0", "127.0.0.1") + "/v2/health/live");
                    HttpResponse<String> r = client.send(HttpRequest.newBuilder(live).timeout(Duration.ofSeconds(30)).build(),
                            HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, r.statusCode(), r.body());
                }
            }
            List<ProcessHandle> children = p.descendants().toList();

            p.destroy(); // SIGTERM
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "no exit within 60 s of SIGTERM:\n" + output());
            assertEquals(0, p.exitValue(), output()); // a clean stop on SIGTERM
            assertTrue(output().contains("shutting down: closing " + endpoints.size() + " frontend(s) and the host"), output());
            assertTrue(output().contains("stopped in "), output());
            for (ProcessHandle c : children) {
                assertTrue(c.onExit().toCompletableFuture().isDone() || !c.isAlive(), "child process left running: " + c.info());
            }
            assertEquals(List.of(), names(tmp()), "files left in java.io.tmpdir");
        } finally {
            if (p.isAlive()) {
                p.destroyForcibly().waitFor();
            }
        }
    }

    private void awaitStarted(Process p) throws Exception {
        try {
            Await.until(() -> !p.isAlive() || unchecked(this::output).contains(" started in "), Duration.ofSeconds(180), "serve to log ' started in '");
        } catch (AssertionError e) {
            fail(e.getMessage() + "\n" + output());
        }
        if (!output().contains(" started in ")) {
            fail("serve did not start (exit " + p.exitValue() + "):\n" + output());
        }
    }

    /** The text {@code read} gives, an I/O error thrown unchecked (for a condition of {@link Await#until}). */
    static String unchecked(IoText read) {
        try {
            return read.get();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    interface IoText {
        String get() throws IOException;
    }

    private Map<String, String> endpoints() throws IOException {
        Map<String, String> endpoints = new LinkedHashMap<>();
        Matcher m = SERVING.matcher(output());
        while (m.find()) {
            endpoints.put(m.group(1), m.group(2));
        }
        return endpoints;
    }

    /**
     * The README's main command: from the repository root, {@code serve} with no repository
     * option serves samples/models. When the python backend and the http frontend are in the
     * layout, the README's curl call (add_sub) is made and its answer checked.
     */
    @Test
    void serve_fromRepositoryRoot_servesSamples_andAnswersTheReadmeCall() throws Exception {
        Path root = Path.of(System.getProperty("backplane.repo", "..")).toAbsolutePath().normalize();
        Process p = launcherIn(root, "serve", "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", "--openai-port", "0").start();
        try {
            awaitStarted(p);
            assertTrue(output().contains("model repositories [" + root.resolve("samples/models") + "]"), output());
            String http = endpoints().get("http");
            boolean python = Files.isDirectory(DIST.resolve("backends/python"));
            if (python) {
                assertTrue(output().contains("add_sub v1 READY") && output().contains("repeat_decoupled v1 READY"), output());
            }
            if (http != null && python) {
                String base = http.replace("0.0.0.0", "127.0.0.1");
                try (HttpClient client = HttpClient.newHttpClient()) {
                    String body = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]},"
                            + "{\"name\":\"INPUT1\",\"shape\":[4],\"datatype\":\"FP32\",\"data\":[10,20,30,40]}]}";
                    HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/add_sub/infer"))
                            .POST(HttpRequest.BodyPublishers.ofString(body)).timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, r.statusCode(), r.body());
                    String compact = r.body().replace(" ", "");
                    assertTrue(compact.contains("\"name\":\"OUTPUT0\"") && compact.contains("[11.0,22.0,33.0,44.0]"), r.body());
                    assertTrue(compact.contains("[-9.0,-18.0,-27.0,-36.0]"), r.body());
                }
            }
            p.destroy();
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "no exit within 60 s of SIGTERM:\n" + output());
            assertTrue(output().contains("stopped in "), output());
        } finally {
            if (p.isAlive()) {
                p.destroyForcibly().waitFor();
            }
        }
    }

    /**
     * {@code --backend-directory} adds a third-party plugin directory (the textops sample) to the
     * bundled backends; {@code --bundled-backends=false} leaves only it.
     */
    @Test
    void serve_backendDirectory_addsToBundledBackends_bundledBackendsFalseReplacesThem() throws Exception {
        Path root = Path.of(System.getProperty("backplane.repo", "..")).toAbsolutePath().normalize();
        Path plugin = root.resolve("samples/custom-backend/target/plugin");
        assertTrue(Files.isDirectory(plugin.resolve("textops")), "the textops sample's plugin directory is built first: " + plugin);
        Path repo = dir.resolve("repo");
        Files.createDirectories(repo.resolve("shout/1"));
        Files.writeString(repo.resolve("shout/config.pbtxt"), "name: \"shout\"\nbackend: \"textops\"\nmax_batch_size: 0\n"
                + "input [ { name: \"TEXT\", data_type: TYPE_STRING, dims: [ 1 ] } ]\noutput [ { name: \"RESULT\", data_type: TYPE_STRING, dims: [ 1 ] } ]\n");
        for (boolean bundled : List.of(true, false)) {
            Process p = launcher("serve", "--model-repository", repo.toString(), "--backend-directory", plugin.toString(), "--bundled-backends=" + bundled,
                    "--http-port", "-1", "--grpc-port", "-1", "--metrics-port", "-1", "--openai-port", "-1").start();
            try {
                awaitStarted(p);
                String out = output();
                assertTrue(out.contains("backend 'textops'") && out.contains("shout v1 READY"), out);
                boolean python = Files.isDirectory(DIST.resolve("backends/python"));
                assertEquals(bundled && python, out.contains("backend 'python'"), "--bundled-backends=" + bundled + ":\n" + out);
                p.destroy();
                assertTrue(p.waitFor(60, TimeUnit.SECONDS), "no exit within 60 s of SIGTERM:\n" + output());
            } finally {
                if (p.isAlive()) {
                    p.destroyForcibly().waitFor();
                }
            }
        }
    }
}
