package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.host.Frontend;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Triton's model control and readiness over a real REST server and the JDK client: the
 * configured server name, {@code unload_dependents}, readiness as the host reports it (strict), and
 * Triton's sentences for unknown models, bad names and models that are not ready.
 */
class HttpModelControlTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path repo;
    @TempDir
    Path outside;
    final TestBackend backend = new TestBackend();
    BackplaneHost host;
    Frontend http;
    HttpClient client;
    String base;

    @BeforeEach
    void start() throws Exception {
        model("m", """
                backend: "testing"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                """);
        model("ens", """
                platform: "ensemble"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                ensemble_scheduling { step [ { model_name: "m" model_version: -1 input_map { key: "IN0" value: "IN0" }
                  output_map { key: "OUT0" value: "OUT0" } } ] }
                """);
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .serverName("triton").unloadTimeout(Duration.ofSeconds(5)).build();
        http = new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        http.start();
        base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
        client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
    }

    private void model(String name, String config) throws Exception {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1")).getParent();
        Files.writeString(dir.resolve("config.pbtxt"), config);
    }

    @AfterEach
    void stop() throws Exception {
        client.close();
        http.close();
        host.close();
        TestSupport.assertNoBackplaneThreads();
    }

    private HttpResponse<String> get(String path) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> post(String path, String body) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30))
                .POST(HttpRequest.BodyPublishers.ofString(body)).header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
    }

    private static String error(HttpResponse<String> r) throws Exception {
        JsonNode e = JSON.readTree(r.body()).get("error");
        return e == null ? r.body() : e.asText();
    }

    @Test
    void cudaSharedMemory_noGpuSupport_refusedWithTritonsSentence() throws Exception {
        HttpResponse<String> reg = post("/v2/cudasharedmemory/region/gpu0/register", "{\"raw_handle\": {\"b64\": \"AAAA\"}, \"device_id\": 0, \"byte_size\": 64}");
        assertEquals(501, reg.statusCode());
        assertTrue(error(reg).startsWith("failed to register CUDA shared memory region: 'gpu0', GPUs not supported; "), error(reg));
        // Status and unregister answer as Triton built without GPUs: none registered, nothing to unregister.
        HttpResponse<String> st = get("/v2/cudasharedmemory/status");
        assertEquals(200, st.statusCode(), st.body());
        assertEquals("[]", st.body());
        assertEquals(200, post("/v2/cudasharedmemory/unregister", "").statusCode());
        assertEquals(200, post("/v2/cudasharedmemory/region/gpu0/unregister", "").statusCode());
        assertEquals(200, get("/v2/health/live").statusCode());
    }

    /**
     * Triton's workflow for a new instance count: read the config, change {@code instance_group}
     * count, load it back as an override. Only the count differs, so the instances change in place
     * (no new backend model); the config and Backplane's {@code instance_stats} show the count.
     */
    @Test
    void loadWithConfigOverride_countsOnly_changesInstancesInPlace() throws Exception {
        model("elastic", """
                backend: "testing"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                instance_group [{ count: 1 kind: KIND_CPU }]
                """);
        assertEquals(200, post("/v2/repository/models/elastic/load", "").statusCode());
        int loads = backend.modelsLoaded.get();
        for (int count : new int[] {3, 1, 4}) {
            com.fasterxml.jackson.databind.node.ObjectNode config = (com.fasterxml.jackson.databind.node.ObjectNode) JSON.readTree(
                    get("/v2/models/elastic/config").body());
            ((com.fasterxml.jackson.databind.node.ObjectNode) config.get("instance_group").get(0)).put("count", count);
            String body = JSON.writeValueAsString(Map.of("parameters", Map.of("config", JSON.writeValueAsString(config))));

            HttpResponse<String> r = post("/v2/repository/models/elastic/load", body);

            assertEquals(200, r.statusCode(), r.body());
            assertEquals(loads, backend.modelsLoaded.get(), "no new backend model: the instances changed in place");
            assertEquals(count, JSON.readTree(get("/v2/models/elastic/config").body()).get("instance_group").get(0).get("count").asInt());
            JsonNode stats = JSON.readTree(get("/v2/models/elastic/stats").body()).get("model_stats").get(0);
            assertEquals(count, stats.get("instance_stats").get("count").asInt(), stats.toString());
            assertEquals(200, get("/v2/models/elastic/ready").statusCode());
        }
    }

    @Test
    void serverMetadata_reportsTheConfiguredName() throws Exception {
        JsonNode md = JSON.readTree(get("/v2").body());
        assertEquals("triton", md.get("name").asText());
        assertTrue(md.get("extensions").toString().contains("\"model_repository(unload_dependents)\""), md.toString());
    }

    @Test
    void unload_unloadDependents_andItsRefusals() throws Exception {
        assertEquals(200, post("/v2/repository/models/ens/load", "").statusCode());
        assertEquals(200, get("/v2/models/m/ready").statusCode(), "the composing model loads with the ensemble");
        assertEquals(200, post("/v2/repository/models/ens/unload", "{\"parameters\": {\"unload_dependents\": false}}").statusCode());
        assertEquals(200, get("/v2/models/m/ready").statusCode(), "unload_dependents false keeps the composing model");
        assertEquals(200, post("/v2/repository/models/ens/load", "").statusCode());
        assertEquals(200, post("/v2/repository/models/ens/unload", "{\"parameters\": {\"unload_dependents\": true}}").statusCode());
        HttpResponse<String> gone = get("/v2/models/m/ready");
        assertEquals(503, gone.statusCode());
        assertEquals("Request for unknown model: 'm' has no available versions; no version of it can serve now", error(gone));

        HttpResponse<String> type = post("/v2/repository/models/m/unload", "{\"parameters\": {\"unload_dependents\": \"yes\"}}");
        assertEquals(400, type.statusCode());
        assertTrue(error(type).startsWith("Unable to parse 'unload_dependents'"), error(type));
        HttpResponse<String> other = post("/v2/repository/models/m/unload", "{\"parameters\": {\"force\": true}}");
        assertEquals(501, other.statusCode());
        assertTrue(error(other).contains("'force'"), error(other));
        HttpResponse<String> unknownLoad = post("/v2/repository/models/m/load", "{\"parameters\": {\"weights\": \"x\"}}");
        assertEquals(400, unknownLoad.statusCode());
        assertTrue(error(unknownLoad).startsWith("unrecognized load parameter 'weights'."), error(unknownLoad));

        HttpResponse<String> traversal = post("/v2/repository/models/x..y/load", "");
        assertEquals(400, traversal.statusCode());
        assertTrue(error(traversal).startsWith("invalid model name 'x..y', model name must not contain path traversal characters"), error(traversal));
        assertEquals(200, post("/v2/repository/models/m/load", "").statusCode(), "the server keeps serving");
    }

    @Test
    void readiness_isWhatTheHostReports_strict() throws Exception {
        HttpResponse<String> unknown = get("/v2/models/nope/ready");
        assertEquals(404, unknown.statusCode());
        assertTrue(error(unknown).startsWith("Request for unknown model: 'nope' is not found"), error(unknown));
        HttpResponse<String> version = get("/v2/models/m/versions/3/ready");
        assertEquals(503, version.statusCode());
        assertTrue(error(version).startsWith("Request for unknown model: 'm' version 3 is not at ready state"), error(version));

        assertEquals(200, post("/v2/repository/models/m/load", "").statusCode());
        assertEquals(200, get("/v2/models/m/ready").statusCode());
        assertEquals(200, get("/v2/health/ready").statusCode());
        backend.ready = false;
        assertEquals(503, get("/v2/models/m/ready").statusCode(), "an instance that cannot serve makes the model not ready");
        assertEquals(503, get("/v2/health/ready").statusCode(), "strict readiness: the server too");
        assertEquals(200, get("/v2/health/live").statusCode());
        backend.ready = true;
        assertEquals(200, get("/v2/models/m/ready").statusCode());
        assertEquals(200, get("/v2/health/ready").statusCode());
    }

    @Test
    void infer_unknownModel_tritonSentenceFirst() throws Exception {
        String body = "{\"inputs\": [{\"name\": \"IN0\", \"datatype\": \"FP32\", \"shape\": [1], \"data\": [1.0]}]}";
        HttpResponse<String> r = post("/v2/models/nope/infer", body);
        assertEquals(404, r.statusCode());
        assertTrue(error(r).startsWith("Request for unknown model: 'nope' is not found"), error(r));
    }

    /** A model file linking out of the repository: the load endpoint answers 400 naming the link and the option (docs/model-repository.md, Links). */
    @Test
    void load_modelLinkingOutOfTheRepository_is400NamingTheLinkAndTheOption() throws Exception {
        model("linked", """
                backend: "testing"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                """);
        Path weights = Files.writeString(outside.resolve("weights"), "secret");
        Files.createSymbolicLink(repo.resolve("linked/1/weights"), weights);

        HttpResponse<String> r = post("/v2/repository/models/linked/load", "");

        assertEquals(400, r.statusCode(), r.body());
        assertTrue(error(r).startsWith("failed to load 'linked', model 'linked': " + repo.resolve("linked/1/weights") + " is a symbolic link to "
                + weights) && error(r).contains("--allow-links-outside-repository"), error(r));
        assertEquals(400, post("/v2/repository/models/linked/load", "").statusCode(), "refused again, nothing half-loaded");
    }
}
