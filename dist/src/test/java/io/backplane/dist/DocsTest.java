package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.testkit.Await;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
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
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every shell block the documentation marks runnable runs as written. A block opened with
 * {@code ```bash runnable} runs with {@code bash -e -o pipefail} in a fresh folder, with the
 * distribution's {@code bin/} first on the PATH (so {@code backplane …} is the built launcher);
 * the blocks of one file run in order in the same folder. A block opened with
 * {@code ```bash runnable server} needs a running server: the test starts
 * {@code backplane serve} on {@code samples/models} (plus {@code my-models/} when an earlier block
 * of the file made one), on free loopback ports, and rewrites {@code localhost:8000/8001/8002}
 * in the block to them, since other builds may hold the real ports.
 */
class DocsTest {
    private static final Path REPO = Path.of(System.getProperty("backplane.repo", "..")).toAbsolutePath().normalize();
    private static final Path DIST = Path.of(System.getProperty("backplane.dist", "target/backplane")).toAbsolutePath().normalize();
    private static final Pattern OPEN = Pattern.compile("^```bash runnable( server)?\\s*$");
    private static final Pattern SERVING = Pattern.compile("frontend '([^']+)' serving at (\\S+)");

    @TempDir
    Path dir;

    record Block(Path file, int line, String text, boolean server) {
        String where() {
            return REPO.relativize(file) + ":" + line;
        }
    }

    static List<Path> documents() throws IOException {
        List<Path> out = new ArrayList<>();
        out.add(REPO.resolve("README.md"));
        try (Stream<Path> s = Files.walk(REPO.resolve("docs"))) {
            s.filter(p -> p.toString().endsWith(".md")).sorted().forEach(out::add);
        }
        try (Stream<Path> s = Files.list(REPO.resolve("samples"))) {
            s.map(p -> p.resolve("README.md")).filter(Files::isRegularFile).sorted().forEach(out::add);
        }
        return out;
    }

    static List<Block> blocks(Path file) throws IOException {
        List<Block> out = new ArrayList<>();
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        for (int i = 0; i < lines.size(); i++) {
            Matcher m = OPEN.matcher(lines.get(i));
            if (!m.matches()) {
                continue;
            }
            int start = i + 1;
            StringBuilder text = new StringBuilder();
            for (i = start; i < lines.size() && !lines.get(i).startsWith("```"); i++) {
                text.append(lines.get(i)).append('\n');
            }
            out.add(new Block(file, start, text.toString(), m.group(1) != null));
        }
        return out;
    }

    @Test
    void documentation_marksTheNewcomerPathRunnable() throws IOException {
        List<Block> readme = blocks(REPO.resolve("README.md"));
        assertTrue(readme.stream().anyMatch(Block::server), "the README's curl calls are runnable blocks");
        int all = 0;
        for (Path d : documents()) {
            all += blocks(d).size();
        }
        assertTrue(all >= 6, "only " + all + " runnable blocks in the documentation");
    }

    @TestFactory
    Stream<DynamicTest> runnableBlocks_runAsWritten() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (Path doc : documents()) {
            List<Block> blocks = blocks(doc);
            if (!blocks.isEmpty()) {
                tests.add(DynamicTest.dynamicTest(REPO.relativize(doc).toString(), () -> runAll(doc, blocks)));
            }
        }
        return tests.stream();
    }

    private void runAll(Path doc, List<Block> blocks) throws Exception {
        Path work = Files.createDirectories(dir.resolve(doc.getFileName().toString().replace(".md", "") + "-" + Math.abs(doc.hashCode())));
        Server server = null;
        try {
            for (Block b : blocks) {
                String text = b.text();
                if (b.server()) {
                    if (server == null) {
                        server = Server.start(work);
                    }
                    text = text.replace("localhost:8000", server.authority("http")).replace("localhost:8001", server.authority("grpc"))
                            .replace("localhost:8002", server.authority("metrics"));
                }
                run(b, text, work);
            }
        } finally {
            if (server != null) {
                server.close();
            }
        }
    }

    private static void run(Block b, String text, Path work) throws Exception {
        Path log = work.resolve("block-" + b.line() + ".log");
        ProcessBuilder pb = new ProcessBuilder("bash", "-e", "-o", "pipefail", "-c", text).directory(work.toFile()).redirectErrorStream(true)
                .redirectOutput(log.toFile());
        pb.environment().put("PATH", DIST.resolve("bin") + ":" + System.getenv("PATH"));
        pb.environment().put("JAVA_OPTS", "-Djava.io.tmpdir=" + Files.createDirectories(work.resolve("tmp")));
        Process p = pb.start();
        try {
            if (!p.waitFor(180, TimeUnit.SECONDS)) {
                fail(b.where() + ": did not finish within 180 s:\n" + text + "\n--- output:\n" + Files.readString(log));
            }
            assertEquals(0, p.exitValue(), b.where() + ": exit status " + p.exitValue() + " for:\n" + text + "\n--- output:\n" + Files.readString(log));
        } finally {
            p.destroyForcibly();
        }
    }

    /** {@code backplane serve} on free loopback ports for the blocks that call a server. */
    private record Server(Process process, Path log, Map<String, String> endpoints) {
        static Server start(Path work) throws Exception {
            List<String> cmd = new ArrayList<>(List.of(DIST.resolve("bin/backplane").toString(), "serve", "--model-repository",
                    REPO.resolve("samples/models").toString()));
            if (Files.isDirectory(work.resolve("my-models"))) {
                cmd.addAll(List.of("--model-repository", work.resolve("my-models").toString()));
            }
            cmd.addAll(List.of("--http-address", "127.0.0.1", "--http-port", "0", "--grpc-address", "127.0.0.1", "--grpc-port", "0",
                    "--metrics-address", "127.0.0.1", "--metrics-port", "0", "--openai-port", "-1"));
            Path log = work.resolve("serve.log");
            ProcessBuilder pb = new ProcessBuilder(cmd).directory(work.toFile()).redirectErrorStream(true).redirectOutput(log.toFile());
            pb.environment().put("JAVA_OPTS", "-Djava.io.tmpdir=" + Files.createDirectories(work.resolve("serve-tmp")));
            Process p = pb.start();
            try {
                Await.until(() -> !p.isAlive() || LayoutTest.unchecked(() -> Files.readString(log)).contains(" started in "), Duration.ofSeconds(180),
                        "serve to log ' started in '");
            } catch (AssertionError e) {
                p.destroyForcibly().waitFor();
                fail(e.getMessage() + ":\n" + Files.readString(log));
            }
            if (!Files.readString(log).contains(" started in ")) {
                fail("serve did not start (exit " + p.exitValue() + "):\n" + Files.readString(log));
            }
            Map<String, String> endpoints = new LinkedHashMap<>();
            Matcher m = SERVING.matcher(Files.readString(log));
            while (m.find()) {
                endpoints.put(m.group(1), m.group(2));
            }
            return new Server(p, log, endpoints);
        }

        String authority(String frontend) {
            String e = endpoints.get(frontend);
            if (e == null) {
                throw new AssertionError("no '" + frontend + "' frontend serving: " + endpoints);
            }
            Matcher m = Pattern.compile("://([^/]+)").matcher(e);
            if (!m.find()) {
                throw new AssertionError("cannot read host:port from " + e);
            }
            return m.group(1);
        }

        void close() throws Exception {
            process.destroy();
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor();
                fail("serve did not stop within 60 s of SIGTERM:\n" + Files.readString(log));
            }
        }
    }
}
