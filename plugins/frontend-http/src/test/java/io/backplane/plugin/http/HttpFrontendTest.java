package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.DataType;
import io.backplane.spi.host.Frontend;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A started REST server exercised by the JDK HttpClient: every endpoint, success and error. */
class HttpFrontendTest {
    static final ObjectMapper JSON = new ObjectMapper();

    TestBackend backend;
    BackplaneHost host;
    HttpFrontend frontend;
    HttpClient client;
    String base;
    int port;

    @BeforeEach
    void start() throws Exception {
        backend = new TestBackend();
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.identity("identity", DataType.FP32))
                .model(TestBackend.allTypes("all_types"))
                .model(TestBackend.text("text", false))
                .model(rateLimited(TestBackend.repeat("repeat")))
                .model(TestBackend.slow("slow"))
                .model(TestBackend.failing("fail"))
                .model(TestBackend.identity("spare", DataType.INT32))
                .loadModel("identity").loadModel("all_types").loadModel("text").loadModel("repeat").loadModel("slow").loadModel("fail")
                .build();
        frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host,
                Map.of("host", "127.0.0.1", "port", "0", "max_body_bytes", "65536")));
        frontend.start();
        port = frontend.port();
        base = "http://127.0.0.1:" + port;
        client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterEach
    void stop() {
        client.close();
        frontend.close();
        host.close();
        TestSupport.assertPortClosed(port);
        TestSupport.assertNoBackplaneThreads();
    }

    HttpResponse<String> get(String path) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> post(String path, String body) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    static JsonNode json(HttpResponse<String> r) throws Exception {
        return JSON.readTree(r.body());
    }

    static String error(HttpResponse<String> r) throws Exception {
        JsonNode e = json(r).get("error");
        assertNotNull(e, "no error field in " + r.body());
        return e.asText();
    }

    void assertStillServes() throws Exception {
        HttpResponse<String> r = post("/v2/models/identity/infer",
                "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1.5,2.5]}]}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("[1.5,2.5]", json(r).get("outputs").get(0).get("data").toString());
    }

    /** {@code config} with one CPU instance whose group has a rate_limiter (the host's limiter is off: parsed, shown, ignored). */
    private static io.backplane.spi.config.ModelConfig rateLimited(io.backplane.spi.config.ModelConfig config) {
        return config.toBuilder().instanceGroups(java.util.List.of(io.backplane.spi.config.InstanceGroup.builder(config.name() + "_0")
                .kind(io.backplane.spi.config.InstanceKind.CPU).rateLimiter(io.backplane.spi.config.RateLimiterConfig.of(
                        java.util.List.of(io.backplane.spi.config.RateLimiterConfig.Resource.of("R1", true, 2)), 3)).build())).build();
    }

    @Test
    void health_liveAndReady_ok() throws Exception {
        HttpResponse<String> live = get("/v2/health/live");
        assertEquals(200, live.statusCode());
        // The Open Inference Protocol's bodies, which KServe's InferenceRESTClient parses.
        assertEquals(true, json(live).get("live").asBoolean(false), live.body());
        assertEquals("application/json", live.headers().firstValue("content-type").orElse(""));
        HttpResponse<String> ready = get("/v2/health/ready");
        assertEquals(200, ready.statusCode());
        assertEquals(true, json(ready).get("ready").asBoolean(false), ready.body());
        HttpResponse<String> model = get("/v2/models/identity/ready");
        assertEquals(200, model.statusCode());
        assertEquals("identity", json(model).get("name").asText(), model.body());
        assertEquals(true, json(model).get("ready").asBoolean(false), model.body());
    }

    @Test
    void serverMetadata_namesVersionAndExtensions() throws Exception {
        JsonNode md = json(get("/v2"));
        assertEquals("backplane", md.get("name").asText());
        assertEquals(host.version(), md.get("version").asText());
        assertTrue(md.get("extensions").toString().contains("binary_tensor_data"));
        List<String> ext = new java.util.ArrayList<>();
        md.get("extensions").forEach(e -> ext.add(e.asText()));
        assertEquals(io.backplane.protocol.Extensions.SERVED, ext);
    }

    @Test
    void statistics_afterInfers_reportTritonFieldsPerModelAndVersion() throws Exception {
        assertStillServes();
        assertStillServes();
        assertEquals(500, post("/v2/models/fail/infer", "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}")
                .statusCode());
        for (String path : List.of("/v2/models/identity/stats", "/v2/models/identity/versions/1/stats")) {
            HttpResponse<String> r = get(path);
            assertEquals(200, r.statusCode(), r.body());
            JsonNode st = json(r).get("model_stats");
            assertEquals(1, st.size(), r.body());
            JsonNode m = st.get(0);
            assertEquals("identity", m.get("name").asText());
            assertEquals("1", m.get("version").asText());
            assertEquals(2, m.get("inference_count").asLong(), r.body());
            assertEquals(2, m.get("execution_count").asLong(), r.body());
            assertTrue(m.get("last_inference").asLong() > 0, r.body());
            JsonNode inf = m.get("inference_stats");
            assertEquals(2, inf.get("success").get("count").asLong(), r.body());
            assertTrue(inf.get("success").get("ns").asLong() > 0, r.body());
            for (String f : List.of("queue", "compute_input", "compute_infer", "compute_output")) {
                assertEquals(2, inf.get(f).get("count").asLong(), f + " in " + r.body());
            }
            assertEquals(0, inf.get("fail").get("count").asLong(), r.body());
            assertEquals(2, m.get("batch_stats").get(0).get("compute_infer").get("count").asLong(), r.body());
        }
        JsonNode fail = json(get("/v2/models/fail/stats")).get("model_stats").get(0);
        assertEquals(1, fail.get("inference_stats").get("fail").get("count").asLong(), fail.toString());
        JsonNode all = json(get("/v2/models/stats")).get("model_stats");
        assertEquals(6, all.size(), all.toString());
        HttpResponse<String> unknown = get("/v2/models/nope/stats");
        assertEquals(404, unknown.statusCode(), unknown.body());
        assertTrue(error(unknown).contains("'nope'"), unknown.body());
        assertEquals(404, get("/v2/models/spare/stats").statusCode());
        assertEquals(404, get("/v2/models/identity/versions/7/stats").statusCode());
    }

    /** Backplane's generation_stats beside Triton's keys: a stream of 3 responses is one first token and 2 inter-token samples. */
    @Test
    void statistics_generationStats_afterStreamAndInfer() throws Exception {
        assertEquals(200, post("/v2/models/repeat/generate_stream", "{\"IN\":3}").statusCode());
        assertStillServes();
        JsonNode repeat = json(get("/v2/models/repeat/stats")).get("model_stats").get(0);
        JsonNode gen = repeat.get("generation_stats");
        assertNotNull(gen, repeat.toString());
        assertEquals(1, gen.get("first_token").get("count").asLong(), gen.toString());
        assertTrue(gen.get("first_token").get("ns").asLong() > 0, gen.toString());
        assertEquals(2, gen.get("inter_token").get("count").asLong(), gen.toString());
        assertTrue(gen.get("inter_token").get("ns").asLong() >= 0, gen.toString());
        assertEquals(3, gen.get("output_tokens").asLong(), gen.toString());
        assertEquals(1, repeat.get("inference_stats").get("success").get("count").asLong(), repeat.toString());
        JsonNode identity = json(get("/v2/models/identity/stats")).get("model_stats").get(0).get("generation_stats");
        assertEquals(1, identity.get("first_token").get("count").asLong(), identity.toString());
        assertEquals(0, identity.get("inter_token").get("count").asLong(), identity.toString());
        assertEquals(1, identity.get("output_tokens").asLong(), identity.toString());
        JsonNode idle = json(get("/v2/models/slow/stats")).get("model_stats").get(0).get("generation_stats");
        assertEquals("{\"first_token\":{\"count\":0,\"ns\":0},\"inter_token\":{\"count\":0,\"ns\":0},\"output_tokens\":0}", idle.toString());
    }

    @Test
    void modelMetadata_plainAndVersioned_listsTensors() throws Exception {
        for (String path : List.of("/v2/models/identity", "/v2/models/identity/versions/1")) {
            HttpResponse<String> r = get(path);
            assertEquals(200, r.statusCode(), r.body());
            JsonNode md = json(r);
            assertEquals("identity", md.get("name").asText());
            assertEquals("[\"1\"]", md.get("versions").toString());
            assertEquals("IN0", md.get("inputs").get(0).get("name").asText());
            assertEquals("FP32", md.get("inputs").get(0).get("datatype").asText());
            assertEquals("[-1]", md.get("inputs").get(0).get("shape").toString());
            assertEquals("OUT0", md.get("outputs").get(0).get("name").asText());
        }
    }

    @Test
    void modelConfig_returnsTritonJson() throws Exception {
        HttpResponse<String> r = get("/v2/models/repeat/config");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode c = json(r);
        assertEquals("repeat", c.get("name").asText());
        assertEquals("TYPE_INT64", c.get("input").get(0).get("data_type").asText());
        assertEquals("[\"1\"]", c.get("input").get(0).get("dims").toString());
        assertTrue(c.get("model_transaction_policy").get("decoupled").asBoolean());
        assertEquals("{\"resources\":[{\"name\":\"R1\",\"global\":true,\"count\":2}],\"priority\":3}",
                c.get("instance_group").get(0).get("rate_limiter").toString(), "Triton's rate_limiter, as configured");
    }

    @Test
    void modelReady_readyUnknownAndUnloaded() throws Exception {
        assertEquals(200, get("/v2/models/identity/ready").statusCode());
        assertEquals(200, get("/v2/models/identity/versions/1/ready").statusCode());
        HttpResponse<String> unknown = get("/v2/models/nope/ready");
        assertEquals(404, unknown.statusCode());
        assertTrue(error(unknown).contains("nope"));
        HttpResponse<String> unloaded = get("/v2/models/spare/ready");
        assertEquals(503, unloaded.statusCode(), unloaded.body());
    }

    @Test
    void unknownModel_everyEndpoint_404() throws Exception {
        assertEquals(404, get("/v2/models/nope").statusCode());
        assertEquals(404, get("/v2/models/nope/config").statusCode());
        HttpResponse<String> r = post("/v2/models/nope/infer", "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}");
        assertEquals(404, r.statusCode(), r.body());
        assertTrue(error(r).contains("nope"));
        assertEquals(404, post("/v2/models/nope/generate", "{\"text_input\":\"x\"}").statusCode());
        assertEquals(404, get("/v2/nowhere").statusCode());
        assertEquals(404, get("/v3").statusCode());
        assertStillServes();
    }

    @Test
    void wrongMethodOrVersion_clearErrors() throws Exception {
        HttpResponse<String> r = get("/v2/models/identity/infer");
        assertEquals(405, r.statusCode());
        assertTrue(error(r).contains("POST"));
        HttpResponse<String> v = get("/v2/models/identity/versions/zero");
        assertEquals(400, v.statusCode());
        assertTrue(error(v).contains("zero"));
        assertEquals(404, get("/v2/models/identity/versions/7").statusCode());
    }

    @Test
    void infer_json_fp32_roundTrips() throws Exception {
        HttpResponse<String> r = post("/v2/models/identity/infer",
                "{\"id\":\"r1\",\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[[1,2],[3,4.5]]}]}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode b = json(r);
        assertEquals("identity", b.get("model_name").asText());
        assertEquals("1", b.get("model_version").asText());
        assertEquals("r1", b.get("id").asText());
        JsonNode out = b.get("outputs").get(0);
        assertEquals("OUT0", out.get("name").asText());
        assertEquals("FP32", out.get("datatype").asText());
        assertEquals("[4]", out.get("shape").toString());
        assertEquals("[1.0,2.0,3.0,4.5]", out.get("data").toString());
    }

    @Test
    void infer_json_everyDatatype_roundTrips() throws Exception {
        Map<DataType, String> data = new java.util.LinkedHashMap<>();
        data.put(DataType.BOOL, "[true,false]");
        data.put(DataType.UINT8, "[0,255]");
        data.put(DataType.UINT16, "[0,65535]");
        data.put(DataType.UINT32, "[0,4294967295]");
        data.put(DataType.UINT64, "[0,18446744073709551615]");
        data.put(DataType.INT8, "[-128,127]");
        data.put(DataType.INT16, "[-32768,32767]");
        data.put(DataType.INT32, "[-2147483648,2147483647]");
        data.put(DataType.INT64, "[-9223372036854775808,9223372036854775807]");
        data.put(DataType.FP16, "[1.5,-2.0]");
        data.put(DataType.BF16, "[1.5,-256.0]");
        data.put(DataType.FP32, "[1.25,-3.5]");
        data.put(DataType.FP64, "[1.0E-300,-2.5]");
        data.put(DataType.BYTES, "[\"hello\",\"wörld\"]");
        StringBuilder req = new StringBuilder("{\"inputs\":[");
        data.forEach((t, d) -> req.append("{\"name\":\"IN_").append(t).append("\",\"datatype\":\"").append(t)
                .append("\",\"shape\":[2],\"data\":").append(d).append("},"));
        req.setLength(req.length() - 1);
        req.append("]}");
        HttpResponse<String> r = post("/v2/models/all_types/infer", req.toString());
        assertEquals(200, r.statusCode(), r.body());
        for (JsonNode out : json(r).get("outputs")) {
            DataType t = DataType.valueOf(out.get("datatype").asText());
            assertEquals("OUT_" + t, out.get("name").asText());
            assertEquals(JSON.readTree(data.get(t)).toString(), out.get("data").toString(), "datatype " + t);
        }
        assertEquals(data.size(), json(r).get("outputs").size());
    }

    @Test
    void infer_binaryInputsAndOutputs_roundTrip() throws Exception {
        float[] values = {1f, -2f, 3.5f, Float.NaN};
        ByteBuffer fp = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            fp.putFloat(v);
        }
        byte[] bytesTensor = bytesElements("ab", "", "ü");
        String header = "{\"inputs\":[{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[4],\"parameters\":{\"binary_data_size\":16}},"
                + "{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[3],\"parameters\":{\"binary_data_size\":" + bytesTensor.length + "}},"
                + "{\"name\":\"IN_INT8\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[5]}],"
                + "\"outputs\":[{\"name\":\"OUT_FP32\",\"parameters\":{\"binary_data\":true}},{\"name\":\"OUT_BYTES\",\"parameters\":{\"binary_data\":true}},"
                + "{\"name\":\"OUT_INT8\",\"parameters\":{\"binary_data\":false}}]}";
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.write(h);
        body.write(fp.array());
        body.write(bytesTensor);
        HttpResponse<byte[]> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/all_types/infer"))
                .header("Inference-Header-Content-Length", Integer.toString(h.length))
                .header("Content-Type", "application/octet-stream")
                .POST(HttpRequest.BodyPublishers.ofByteArray(body.toByteArray())).build(), HttpResponse.BodyHandlers.ofByteArray());
        assertEquals(200, r.statusCode(), new String(r.body(), StandardCharsets.UTF_8));
        int jsonLength = Integer.parseInt(r.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
        JsonNode head = JSON.readTree(Arrays.copyOf(r.body(), jsonLength));
        JsonNode outs = head.get("outputs");
        assertEquals(3, outs.size());
        int off = jsonLength;
        for (JsonNode o : outs) {
            switch (o.get("name").asText()) {
                case "OUT_FP32" -> {
                    assertEquals(16, o.get("parameters").get("binary_data_size").asInt());
                    assertArrayEquals(fp.array(), Arrays.copyOfRange(r.body(), off, off + 16));
                    off += 16;
                }
                case "OUT_BYTES" -> {
                    int n = o.get("parameters").get("binary_data_size").asInt();
                    assertArrayEquals(bytesTensor, Arrays.copyOfRange(r.body(), off, off + n));
                    off += n;
                }
                case "OUT_INT8" -> assertEquals("[5]", o.get("data").toString());
                default -> throw new AssertionError(o.toString());
            }
        }
        assertEquals(r.body().length, off);
    }

    @Test
    void infer_binaryDataOutputParameter_makesEveryOutputBinary() throws Exception {
        HttpResponse<byte[]> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/identity/infer"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"parameters\":{\"binary_data_output\":true},"
                        + "\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[2.0]}]}")).build(),
                HttpResponse.BodyHandlers.ofByteArray());
        assertEquals(200, r.statusCode());
        int n = Integer.parseInt(r.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
        assertEquals(n + 4, r.body().length);
        assertEquals(2.0f, ByteBuffer.wrap(r.body(), n, 4).order(ByteOrder.LITTLE_ENDIAN).getFloat());
    }

    @Test
    void infer_binaryDataOutput_perOutputBinaryDataOverridesIt_asTriton() throws Exception {
        String inputs = "\"inputs\":[{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[2.0]},"
                + "{\"name\":\"IN_INT8\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[5]}]";
        // Request-level true: an output that says nothing is binary, one that says binary_data=false stays JSON.
        HttpResponse<byte[]> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/all_types/infer"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"parameters\":{\"binary_data_output\":true}," + inputs
                        + ",\"outputs\":[{\"name\":\"OUT_FP32\"},{\"name\":\"OUT_INT8\",\"parameters\":{\"binary_data\":false}}]}")).build(),
                HttpResponse.BodyHandlers.ofByteArray());
        assertEquals(200, r.statusCode(), new String(r.body(), StandardCharsets.UTF_8));
        assertEquals("application/octet-stream", r.headers().firstValue("Content-Type").orElseThrow());
        int n = Integer.parseInt(r.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
        JsonNode head = JSON.readTree(Arrays.copyOf(r.body(), n));
        for (JsonNode o : head.get("outputs")) {
            if (o.get("name").asText().equals("OUT_FP32")) {
                assertEquals(4, o.get("parameters").get("binary_data_size").asInt(), o.toString());
                assertFalse(o.has("data"), o.toString());
            } else {
                assertEquals("[5]", o.get("data").toString(), o.toString());
                assertFalse(o.has("parameters"), o.toString());
            }
        }
        assertEquals(n + 4, r.body().length);
        assertEquals(2.0f, ByteBuffer.wrap(r.body(), n, 4).order(ByteOrder.LITTLE_ENDIAN).getFloat());

        // Request-level false (the default) and nothing per output: plain JSON, no binary header.
        HttpResponse<String> plain = post("/v2/models/all_types/infer", "{\"parameters\":{\"binary_data_output\":false}," + inputs
                + ",\"outputs\":[{\"name\":\"OUT_FP32\"}]}");
        assertEquals(200, plain.statusCode(), plain.body());
        assertTrue(plain.headers().firstValue("Inference-Header-Content-Length").isEmpty());
        assertEquals("[2.0]", json(plain).get("outputs").get(0).get("data").toString());

        HttpResponse<String> notBool = post("/v2/models/all_types/infer", "{\"parameters\":{\"binary_data_output\":\"yes\"}," + inputs + "}");
        assertEquals(400, notBool.statusCode(), notBool.body());
        assertTrue(error(notBool).contains("binary_data_output"), notBool.body());
    }

    static byte[] bytesElements(String... els) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (String e : els) {
            byte[] b = e.getBytes(StandardCharsets.UTF_8);
            out.writeBytes(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(b.length).array());
            out.writeBytes(b);
        }
        return out.toByteArray();
    }

    @Test
    void infer_badInputs_400WithClearMessage_andServerKeepsServing() throws Exception {
        record Case(String body, String expect) {
        }
        List<Case> cases = List.of(
                new Case("{\"inputs\":[{\"name\":\"IN0\"", "malformed JSON"),
                new Case("[1,2]", "JSON object"),
                new Case("", "empty"),
                new Case("{}", "'inputs'"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[3],\"data\":[1,2]}]}", "needs 3 elements"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[1]}]}", "INT32"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP33\",\"shape\":[1],\"data\":[1]}]}", "FP33"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[\"x\"]}]}", "expected a number"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[-1],\"data\":[1]}]}", "invalid dimension"),
                new Case("{\"inputs\":[{\"name\":\"WRONG\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", "WRONG"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1]}]}", "neither 'data'"),
                new Case("{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"parameters\":{\"binary_data_size\":4}}]}", "truncated"));
        for (Case c : cases) {
            HttpResponse<String> r = post("/v2/models/identity/infer", c.body());
            assertEquals(400, r.statusCode(), c.body() + " -> " + r.body());
            assertTrue(error(r).contains(c.expect()), c.body() + " -> " + r.body());
        }
        HttpResponse<String> range = post("/v2/models/all_types/infer",
                "{\"inputs\":[{\"name\":\"IN_INT8\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[300]}]}");
        assertEquals(400, range.statusCode());
        assertTrue(error(range).contains("300"), range.body());
        assertStillServes();
    }

    @Test
    void infer_truncatedBinaryPayload_400() throws Exception {
        String header = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[4],\"parameters\":{\"binary_data_size\":16}}]}";
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        byte[] body = Arrays.copyOf(h, h.length + 7);
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/identity/infer"))
                .header("Inference-Header-Content-Length", Integer.toString(h.length))
                .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(400, r.statusCode());
        assertTrue(error(r).contains("only 7 bytes"), r.body());
        HttpResponse<String> bad = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/identity/infer"))
                .header("Inference-Header-Content-Length", "99999").POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(400, bad.statusCode());
        assertTrue(error(bad).contains("exceeds the body length"), bad.body());
        assertStillServes();
    }

    @Test
    void infer_oversizedBody_400_thenServerKeepsServing() throws Exception {
        String big = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],\"pad\":\"" + "x".repeat(70_000) + "\"}";
        HttpResponse<String> r = post("/v2/models/identity/infer", big);
        assertEquals(400, r.statusCode());
        assertTrue(error(r).contains("65536"), r.body());
        assertStillServes();
    }

    @Test
    void infer_modelErrors_mapToStatus() throws Exception {
        HttpResponse<String> fail = post("/v2/models/fail/infer", "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}");
        assertEquals(500, fail.statusCode(), fail.body());
        assertTrue(error(fail).contains("failed on purpose"), fail.body());
        HttpResponse<String> decoupled = post("/v2/models/repeat/infer", "{\"inputs\":[{\"name\":\"IN\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":[2]}]}");
        assertEquals(400, decoupled.statusCode());
        assertTrue(error(decoupled).contains("decoupled"), decoupled.body());
        assertStillServes();
    }

    @Test
    void generate_plainModel_returnsOutputsByName() throws Exception {
        HttpResponse<String> r = post("/v2/models/text/generate", "{\"text_input\":\"hello\",\"parameters\":{\"temperature\":0.5}}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode b = json(r);
        assertEquals("hello", b.get("text_output").asText());
        assertEquals("text", b.get("model_name").asText());
        HttpResponse<String> bad = post("/v2/models/text/generate", "{\"nope\":1}");
        assertEquals(400, bad.statusCode());
        assertTrue(error(bad).contains("text_input"), bad.body());
    }

    @Test
    void generateStream_decoupledModel_streamsServerSentEvents() throws Exception {
        HttpResponse<String> r = post("/v2/models/repeat/generate_stream", "{\"IN\":3}");
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.headers().firstValue("content-type").orElse("").startsWith("text/event-stream"));
        List<JsonNode> events = new ArrayList<>();
        for (String block : r.body().split("\n\n")) {
            if (block.startsWith("data: ")) {
                events.add(JSON.readTree(block.substring(6)));
            }
        }
        assertEquals(3, events.size(), r.body());
        for (int i = 0; i < 3; i++) {
            assertEquals(i, events.get(i).get("OUT").asLong());
        }
        HttpResponse<String> none = post("/v2/models/repeat/generate", "{\"IN\":2}");
        assertEquals(400, none.statusCode());
        assertTrue(error(none).contains("generate_stream"), none.body());
        HttpResponse<String> unknown = post("/v2/models/nope/generate_stream", "{\"IN\":1}");
        assertEquals(404, unknown.statusCode());
    }

    @Test
    void repository_indexLoadUnload_whileRequestsRun() throws Exception {
        JsonNode index = json(post("/v2/repository/index", ""));
        assertTrue(index.toString().contains("\"name\":\"spare\""), index.toString());
        JsonNode ready = json(post("/v2/repository/index", "{\"ready\":true}"));
        assertFalse(ready.toString().contains("\"name\":\"spare\""), ready.toString());

        assertEquals(200, post("/v2/repository/models/spare/load", "").statusCode());
        HttpResponse<String> ok = post("/v2/models/spare/infer", "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[7]}]}");
        assertEquals(200, ok.statusCode(), ok.body());

        backend.delayMillis = 300;
        String slowReq = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}";
        List<CompletableFuture<HttpResponse<String>>> running = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            running.add(client.sendAsync(HttpRequest.newBuilder(URI.create(base + "/v2/models/slow/infer"))
                    .POST(HttpRequest.BodyPublishers.ofString(slowReq)).build(), HttpResponse.BodyHandlers.ofString()));
        }
        Thread.sleep(100);
        assertEquals(200, post("/v2/repository/models/slow/unload", "").statusCode());
        for (CompletableFuture<HttpResponse<String>> f : running) {
            HttpResponse<String> r = f.get();
            assertTrue(r.statusCode() == 200 || r.statusCode() == 503, r.statusCode() + " " + r.body());
        }
        HttpResponse<String> after = post("/v2/models/slow/infer", slowReq);
        assertTrue(after.statusCode() == 404 || after.statusCode() == 503, after.statusCode() + " " + after.body());
        assertEquals(200, post("/v2/repository/models/slow/load", "").statusCode());
        assertEquals(200, post("/v2/models/slow/infer", slowReq).statusCode());

        HttpResponse<String> unknown = post("/v2/repository/models/nope/load", "");
        assertEquals(404, unknown.statusCode(), unknown.body());
        HttpResponse<String> escape = post("/v2/repository/models/spare/load", "{\"parameters\":{\"config\":\"{}\",\"file:../evil\":\"AAAA\"}}");
        assertEquals(400, escape.statusCode(), escape.body());
        assertTrue(error(escape).contains("file:../evil"), escape.body());
        HttpResponse<String> unloadParams = post("/v2/repository/models/spare/unload", "{\"parameters\":{\"x\":\"y\"}}");
        assertEquals(501, unloadParams.statusCode(), "UNSUPPORTED is HTTP 501, as Triton answers");
    }

    @Test
    void readiness_instancesDown_notReady_thenRecovers() throws Exception {
        backend.ready = false;
        HttpResponse<String> notReady = get("/v2/health/ready");
        assertEquals(503, notReady.statusCode());
        assertEquals(false, json(notReady).get("ready").asBoolean(true), notReady.body());
        assertEquals(503, get("/v2/models/identity/ready").statusCode());
        assertEquals(200, get("/v2/health/live").statusCode());
        backend.ready = true;
        assertEquals(200, get("/v2/health/ready").statusCode());
        assertEquals(200, get("/v2/models/identity/ready").statusCode());
    }

    @Test
    void options_unknownOrBad_rejected() {
        var e = org.junit.jupiter.api.Assertions.assertThrows(io.backplane.spi.BackplaneException.class,
                () -> new HttpFrontendFactory().create(TestSupport.context(host, Map.of("prot", "1"))));
        assertTrue(e.getMessage().contains("prot"));
        var e2 = org.junit.jupiter.api.Assertions.assertThrows(io.backplane.spi.BackplaneException.class,
                () -> new HttpFrontendFactory().create(TestSupport.context(host, Map.of("port", "70000"))));
        assertTrue(e2.getMessage().contains("70000"));
    }

    @Test
    void serviceLoader_findsHttpFactory() {
        List<String> names = java.util.ServiceLoader.load(io.backplane.spi.host.FrontendFactory.class).stream()
                .map(p -> p.get().name()).toList();
        assertTrue(names.contains("http"), names.toString());
        Frontend f = frontend;
        assertTrue(f.endpoint().endsWith(":" + port));
    }
}
