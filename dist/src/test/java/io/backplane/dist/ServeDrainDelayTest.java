package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.testkit.Await;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve --drain-delay-secs}: on SIGTERM readiness turns false first while requests are still
 * served, so a balancer that checks readiness stops sending before the server refuses; then the
 * server stops as usual and exits 0. The real distribution, a real signal, a real HTTP client.
 */
@Timeout(300)
class ServeDrainDelayTest {
    private static final String INFER = """
            {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                        {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]}""";

    @TempDir
    Path dir;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    private int status(String url) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.discarding())
                    .statusCode();
        } catch (IOException e) {
            return -1; // refused: the server no longer accepts
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    private HttpResponse<String> infer(String base) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/onnx_add_sub/infer")).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(INFER)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void sigterm_readinessFalseFirst_requestsStillServedDuringTheDelay_thenExits0() throws Exception {
        Path models = ServeProcess.DIST.resolve("samples/models");
        Assumptions.assumeTrue(Files.isDirectory(models.resolve("onnx_add_sub")), "the layout has no samples/models/onnx_add_sub");
        try (ServeProcess server = ServeProcess.in(dir, "drain").repository(models).loadModels("onnx_add_sub").frontends("http")
                .args("--drain-delay-secs", "15").start()) {
            server.awaitStarted(Duration.ofSeconds(120));
            String base = server.endpoint("http").replaceAll("/+$", "");
            assertEquals(200, status(base + "/v2/health/ready"));
            assertEquals(200, infer(base).statusCode());

            server.signal("TERM", false);
            Await.until(() -> status(base + "/v2/health/ready") != 200, Duration.ofSeconds(30), "readiness to turn false after SIGTERM");

            assertEquals(503, status(base + "/v2/health/ready"), "readiness false, the server still answering:\n" + server.output());
            assertEquals(200, status(base + "/v2/health/live"), "still live");
            HttpResponse<String> during = infer(base);
            assertEquals(200, during.statusCode(), "a request sent after readiness turned false is still served: " + during.body());
            assertTrue(during.body().contains("\"OUTPUT0\""), during.body());
            assertEquals(0, server.awaitExit(), server.output());
            assertTrue(server.output().contains("serving on for 15 s (--drain-delay-secs)"), server.output());
        }
    }
}
