package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.core.BackplaneHost;
import io.backplane.spi.DataType;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Triton's system shared-memory extension through the real REST server and a /dev/shm object. */
class HttpSharedMemoryTest {
    static final ObjectMapper JSON = new ObjectMapper();

    BackplaneHost host;
    HttpFrontend frontend;
    HttpClient client;
    String base;
    String key;
    Path file;

    @BeforeEach
    void start() throws Exception {
        key = "/backplane-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        file = Path.of("/dev/shm", key.substring(1));
        Files.write(file, new byte[4096]);
        host = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32))
                .loadModel("identity").build();
        frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        base = "http://127.0.0.1:" + frontend.port();
        client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    }

    @AfterEach
    void stop() throws Exception {
        client.close();
        frontend.close();
        host.close();
        Files.deleteIfExists(file);
        TestSupport.assertNoBackplaneThreads();
    }

    HttpResponse<String> post(String path, String body) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> get(String path) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    void register(String region, long offset, long size) throws Exception {
        HttpResponse<String> r = post("/v2/systemsharedmemory/region/" + region + "/register",
                "{\"key\":\"" + key + "\",\"offset\":" + offset + ",\"byte_size\":" + size + "}");
        assertEquals(200, r.statusCode(), r.body());
    }

    @Test
    void infer_inputsAndOutputsInRegions_roundTripWithoutTensorBytesInTheBody() throws Exception {
        register("in", 0, 1024);
        register("out", 1024, 1024);
        ByteBuffer in = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putFloat(1).putFloat(2).putFloat(3).putFloat(4);
        byte[] all = Files.readAllBytes(file);
        System.arraycopy(in.array(), 0, all, 0, 16);
        Files.write(file, all);

        HttpResponse<String> r = post("/v2/models/identity/infer", """
                {"inputs":[{"name":"IN0","datatype":"FP32","shape":[4],"parameters":{"shared_memory_region":"in","shared_memory_byte_size":16}}],
                 "outputs":[{"name":"OUT0","parameters":{"shared_memory_region":"out","shared_memory_offset":8,"shared_memory_byte_size":32}}]}""");

        assertEquals(200, r.statusCode(), r.body());
        JsonNode out = JSON.readTree(r.body()).get("outputs").get(0);
        assertEquals("out", out.get("parameters").get("shared_memory_region").asText());
        assertEquals(16, out.get("parameters").get("shared_memory_byte_size").asLong());
        assertTrue(out.get("data") == null, r.body());
        byte[] after = Files.readAllBytes(file);
        byte[] got = new byte[16];
        System.arraycopy(after, 1024 + 8, got, 0, 16);
        assertArrayEquals(in.array(), got);
    }

    @Test
    void status_afterRegisterAndUnregister_listsExactlyTheLiveRegions() throws Exception {
        register("a", 0, 100);
        register("b", 100, 200);
        JsonNode all = JSON.readTree(get("/v2/systemsharedmemory/status").body());
        assertEquals(2, all.size());
        JsonNode b = JSON.readTree(get("/v2/systemsharedmemory/region/b/status").body()).get(0);
        assertEquals(key, b.get("key").asText());
        assertEquals(100, b.get("offset").asLong());
        assertEquals(200, b.get("byte_size").asLong());

        assertEquals(200, post("/v2/systemsharedmemory/region/a/unregister", "").statusCode());
        assertEquals(1, JSON.readTree(get("/v2/systemsharedmemory/status").body()).size());
        assertEquals(404, get("/v2/systemsharedmemory/region/a/status").statusCode());
        assertEquals(200, post("/v2/systemsharedmemory/unregister", "").statusCode());
        assertEquals(0, JSON.readTree(get("/v2/systemsharedmemory/status").body()).size());
    }

    @Test
    void register_lyingOrHostileValues_clearErrorsAndNothingRegistered() throws Exception {
        HttpResponse<String> tooBig = post("/v2/systemsharedmemory/region/r/register", "{\"key\":\"" + key + "\",\"offset\":4000,\"byte_size\":200}");
        assertEquals(400, tooBig.statusCode());
        assertTrue(tooBig.body().contains("4096 bytes"), tooBig.body());
        HttpResponse<String> traversal = post("/v2/systemsharedmemory/region/r/register", "{\"key\":\"/../etc/passwd\",\"byte_size\":10}");
        assertEquals(400, traversal.statusCode());
        assertTrue(traversal.body().contains("/../etc/passwd"), traversal.body());
        HttpResponse<String> missing = post("/v2/systemsharedmemory/region/r/register", "{\"key\":\"/backplane-test-missing-" + System.nanoTime()
                + "\",\"byte_size\":10}");
        assertEquals(500, missing.statusCode(), "Triton's code for a missing object: INTERNAL");
        assertTrue(missing.body().contains("Unable to open shared memory region: '/backplane-test-missing-"), missing.body());
        assertEquals(0, JSON.readTree(get("/v2/systemsharedmemory/status").body()).size());
    }

    @Test
    void infer_sizesOutsideTheRegion_clearErrorNoRead() throws Exception {
        register("in", 0, 16);
        HttpResponse<String> outside = post("/v2/models/identity/infer", """
                {"inputs":[{"name":"IN0","datatype":"FP32","shape":[8],"parameters":{"shared_memory_region":"in","shared_memory_byte_size":32}}]}""");
        assertEquals(400, outside.statusCode());
        assertTrue(outside.body().contains("outside region 'in' of 16 bytes"), outside.body());
        HttpResponse<String> mismatch = post("/v2/models/identity/infer", """
                {"inputs":[{"name":"IN0","datatype":"FP32","shape":[8],"parameters":{"shared_memory_region":"in","shared_memory_byte_size":16}}]}""");
        assertEquals(400, mismatch.statusCode());
        assertTrue(mismatch.body().contains("needs 32 bytes"), mismatch.body());
        register("small", 16, 8);
        HttpResponse<String> smallOut = post("/v2/models/identity/infer", """
                {"inputs":[{"name":"IN0","datatype":"FP32","shape":[4],"parameters":{"shared_memory_region":"in","shared_memory_byte_size":16}}],
                 "outputs":[{"name":"OUT0","parameters":{"shared_memory_region":"small","shared_memory_byte_size":8}}]}""");
        assertEquals(400, smallOut.statusCode());
        assertTrue(smallOut.body().contains("output 'OUT0' is 16 bytes"), smallOut.body());
        HttpResponse<String> unknown = post("/v2/models/identity/infer", """
                {"inputs":[{"name":"IN0","datatype":"FP32","shape":[4],"parameters":{"shared_memory_region":"nope","shared_memory_byte_size":16}}]}""");
        assertEquals(400, unknown.statusCode());
        assertTrue(unknown.body().contains("'nope' is not registered"), unknown.body());
    }

    @Test
    void cudaSharedMemory_registerAnswersNotSupported_statusEmpty() throws Exception {
        HttpResponse<String> r = post("/v2/cudasharedmemory/region/g/register", "{\"raw_handle\": {\"b64\": \"AAAA\"}, \"device_id\": 0, \"byte_size\": 64}");
        assertEquals(501, r.statusCode(), "UNSUPPORTED is HTTP 501, as Triton answers");
        assertTrue(r.body().contains("CUDA shared memory is not supported"), r.body());
        assertEquals("[]", get("/v2/cudasharedmemory/status").body());
    }
}
