package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The python models of {@link PythonApiTest} as a REST client sees them, over the real HTTP
 * frontend on an ephemeral loopback port: response parameters, the auto-completed config and
 * Triton's error texts.
 */
class PythonRestTest {
    @TempDir
    Path temp;

    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    @Test
    void rest_parametersConfigAndErrors_asTritonClientsSeeThem() throws Exception {
        PythonApiTest.python();
        PythonApiTest api = new PythonApiTest();
        api.temp = temp;
        Path repo = api.repository("sender", "completed");
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).build()) {
            FrontendFactory http = host.frontendFactories().get("http");
            try (Frontend f = http.create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
                f.start();
                String base = f.endpoint();

                HttpResponse<String> r = post(base + "/v2/models/sender/infer",
                        "{\"inputs\":[{\"name\":\"MODE\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[" + PythonApiTest.PARAMETERS + "]}]}");
                assertEquals(200, r.statusCode(), r.body());
                JsonNode params = StubJson.MAPPER.readTree(r.body()).get("parameters");
                assertEquals("ten", params.get("text").asText(), r.body());
                assertEquals(10, params.get("count").asInt());
                assertTrue(params.get("flag").asBoolean());

                r = post(base + "/v2/models/sender/infer",
                        "{\"inputs\":[{\"name\":\"MODE\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[" + PythonApiTest.FINAL_ONLY + "]}]}");
                assertEquals(500, r.statusCode(), r.body());
                assertTrue(StubJson.MAPPER.readTree(r.body()).get("error").asText()
                        .contains("Non-decoupled model cannot send complete final before sending a response"), r.body());

                r = CLIENT.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/completed/config")).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                assertEquals(200, r.statusCode(), r.body());
                JsonNode config = StubJson.MAPPER.readTree(r.body());
                assertEquals(8, config.get("max_batch_size").asInt(), r.body());
                assertEquals("INPUT1", config.get("input").get(1).get("name").asText(), r.body());
                assertTrue(config.get("input").get(1).get("optional").asBoolean(), r.body());
            }
        }
    }

    private static HttpResponse<String> post(String url, String body) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }
}
