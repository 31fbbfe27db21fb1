package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.DataType;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Option {@code health_body}: the Open Inference Protocol's JSON bodies by default (KServe's client
 * parses them), or Triton's empty answers for scripts that compare the whole answer, such as
 * Triton's QA {@code util.sh}, whose {@code curl -s -w %{http_code}} must print exactly {@code 200}.
 */
class HealthBodyTest {
    @Test
    void healthBodyEmpty_statusAlone_asTriton() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build();
                HttpClient client = HttpClient.newHttpClient()) {
            HttpFrontend frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0",
                    "health_body", "empty")));
            frontend.start();
            try {
                for (String path : new String[] {"/v2/health/live", "/v2/health/ready", "/v2/models/identity/ready"}) {
                    HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + frontend.port() + path))
                            .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, r.statusCode(), path);
                    assertEquals("", r.body(), path);
                }
            } finally {
                frontend.close();
            }
        }
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void healthBodyOtherValue_refusedNamingIt() {
        var e = assertThrows(RuntimeException.class, () -> FrontendOptions.parse(Map.of("health_body", "xml")));
        assertTrue(e.getMessage().contains("health_body='xml'"), e.getMessage());
    }
}
