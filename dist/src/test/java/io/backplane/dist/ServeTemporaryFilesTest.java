package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 32 (L10, R3): nothing is left in the temporary folder after {@code backplane serve} exits,
 * whatever the plugins leave to the JVM's delete-on-exit. The real server serves the sample ONNX
 * model (the cpu backend unpacks ONNX Runtime's native library, about 22 MB, into an
 * {@code onnxruntime-java*} folder of {@code java.io.tmpdir} for the JVM to delete at exit; the backend now deletes it itself once
 * loaded), with
 * {@code java.io.tmpdir} set to a fresh folder of the test's own, so that what is left is counted
 * exactly: nothing after a signal stop (SIGTERM, and Ctrl-C: SIGINT to the process group), and what
 * a SIGKILLed server left is removed by the next start.
 */
@Timeout(300)
class ServeTemporaryFilesTest {
    private static final Path DIST = ServeProcess.DIST;
    private static final String INFER = """
            {"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},
                       {"name":"INPUT1","datatype":"FP32","shape":[1,4],"data":[4,3,2,1]}]}""";

    @TempDir
    Path dir;
    Path tmp;

    @BeforeEach
    void requireOnnxBackend() throws IOException {
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/cpu")), "the layout has no cpu (ONNX Runtime) backend");
        tmp = Files.createDirectories(dir.resolve("tmp"));
    }

    /** The server of the sample ONNX model, java.io.tmpdir (and TMPDIR) the test's. */
    private ServeProcess serve(String name) throws IOException {
        return ServeProcess.in(dir, name).repository(DIST.resolve("samples/models")).frontends("http").loadModels("onnx_add_sub")
                .args("--exit-timeout-secs", "3").env("JAVA_OPTS", "-Xmx256m -Djava.io.tmpdir=" + tmp).env("TMPDIR", tmp.toString()).start();
    }

    /** Serves one inference of the sample ONNX model; returns the server's private temporary folder, the only thing in the test's. */
    private Path serveOneInference(ServeProcess s) throws Exception {
        s.awaitStarted(Duration.ofSeconds(120));
        int port = s.port("http");
        try (HttpClient client = HttpClient.newHttpClient()) {
            HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v2/models/onnx_add_sub/infer"))
                    .timeout(Duration.ofSeconds(60)).POST(HttpRequest.BodyPublishers.ofString(INFER)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            assertTrue(r.body().contains("OUTPUT0"), r.body());
        }
        List<String> entries = names(tmp);
        assertEquals(List.of("backplane-jvm-" + s.pid()), entries.stream().map(n -> n.substring(0, n.lastIndexOf('-'))).toList(),
                "one private folder of the server's: " + entries);
        Path own = tmp.resolve(entries.getFirst());
        // ORT unpacks its native library into java.io.tmpdir, the server's folder; the cpu backend deletes it once loaded (Ort)
        assertTrue(names(own).stream().noneMatch(n -> n.startsWith("onnxruntime-java")),
                "ONNX Runtime's unpacked library is deleted once it is loaded: " + names(own));
        return own;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"TERM", "INT"})
    void serve_onnxModel_thenSignal_leavesNothingInTheTemporaryFolder(String signal) throws Exception {
        try (ServeProcess s = serve("serve-" + signal)) {
            serveOneInference(s);
            s.signal(signal, signal.equals("INT")); // Ctrl-C goes to the terminal's foreground process group
            assertEquals(0, s.awaitExit(), s.output());
            assertTrue(s.output().contains("stopped in "), "a clean stop:\n" + s.output());
            assertEquals(List.of(), names(tmp), "left in the temporary folder after SIG" + signal + ":\n" + s.output());
        }
    }

    @Test
    void serve_killedServer_itsTemporaryFolderIsRemovedAtTheNextStart() throws Exception {
        Path left;
        try (ServeProcess killed = serve("killed")) {
            left = serveOneInference(killed);
            killed.signal("KILL", true);
            killed.awaitExit();
        }
        assertTrue(Files.isDirectory(left), "a SIGKILLed server cannot remove its folder: " + names(tmp));
        try (ServeProcess next = serve("next")) {
            next.awaitStarted(Duration.ofSeconds(120));
            assertFalse(Files.exists(left), "the next start removed " + left + ":\n" + next.output());
            assertTrue(next.output().contains("removed 1 temporary folder(s) left by dead servers"), next.output());
            next.signal("TERM", false);
            assertEquals(0, next.awaitExit(), next.output());
        }
        assertEquals(List.of(), names(tmp), "left in the temporary folder");
    }

    private static List<String> names(Path d) throws IOException {
        try (Stream<Path> f = Files.list(d)) {
            return f.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }
}
