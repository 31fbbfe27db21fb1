package io.backplane.plugin.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.DataType;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The request bodies Triton's clients and QA tests send that go beyond plain JSON and the binary
 * tensor extension: the raw binary request ({@code Inference-Header-Content-Length: 0}), gzip and
 * deflate bodies, the nesting and size limits with Triton's words, and the repository index's
 * {@code ready} flag read without descending into a bad value.
 */
class TritonBodiesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int LIMIT = 65_536;

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
                .model(TestBackend.identity("two", DataType.FP32, DataType.FP32))
                .model(ModelConfig.builder("batched").backend(TestBackend.NAME).maxBatchSize(4)
                        .input(TensorConfig.of("IN0", DataType.INT32, 2, -1)).output(TensorConfig.of("OUT0", DataType.INT32, 2, -1)).build())
                .model(ModelConfig.builder("two_variable").backend(TestBackend.NAME)
                        .input(TensorConfig.of("IN0", DataType.FP16, -1, -1)).output(TensorConfig.of("OUT0", DataType.FP16, -1, -1)).build())
                .model(ModelConfig.builder("fixed").backend(TestBackend.NAME)
                        .input(TensorConfig.of("IN0", DataType.FP32, 4)).output(TensorConfig.of("OUT0", DataType.FP32, 4)).build())
                .model(TestBackend.identity("one_string", DataType.BYTES))
                .model(ModelConfig.builder("string1").backend(TestBackend.NAME)
                        .input(TensorConfig.of("IN0", DataType.BYTES, 1)).output(TensorConfig.of("OUT0", DataType.BYTES, 1)).build())
                .loadModel("identity").loadModel("two").loadModel("batched").loadModel("two_variable").loadModel("fixed").loadModel("one_string")
                .loadModel("string1")
                .build();
        frontend = (HttpFrontend) new HttpFrontendFactory().create(TestSupport.context(host,
                Map.of("host", "127.0.0.1", "port", "0", "max_body_bytes", Integer.toString(LIMIT))));
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

    private HttpResponse<byte[]> post(String path, byte[] body, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20))
                .POST(HttpRequest.BodyPublishers.ofByteArray(body));
        for (int i = 0; i < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return client.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    private static String error(HttpResponse<byte[]> r) throws Exception {
        return JSON.readTree(r.body()).get("error").asText();
    }

    /** The JSON header of a binary answer, and the bytes after it. */
    private static JsonNode header(HttpResponse<byte[]> r) throws Exception {
        int n = Integer.parseInt(r.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
        return JSON.readTree(Arrays.copyOf(r.body(), n));
    }

    private static byte[] tail(HttpResponse<byte[]> r) {
        int n = Integer.parseInt(r.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
        return Arrays.copyOfRange(r.body(), n, r.body().length);
    }

    private static byte[] floats(int n) {
        ByteBuffer b = ByteBuffer.allocate(4 * n).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            b.putFloat(i);
        }
        return b.array();
    }

    @Test
    void raw_oneVariableDimension_shapeFromTheByteCount_everyOutputBinary() throws Exception {
        for (int n : new int[] {8, 32}) {
            byte[] in = floats(n);
            HttpResponse<byte[]> r = post("/v2/models/identity/infer", in, "Inference-Header-Content-Length", "0");
            assertEquals(200, r.statusCode(), new String(r.body(), StandardCharsets.UTF_8));
            JsonNode out = header(r).get("outputs").get(0);
            assertEquals("[" + n + "]", out.get("shape").toString());
            assertEquals(4 * n, out.get("parameters").get("binary_data_size").asInt());
            assertArrayEquals(in, tail(r));
        }
    }

    @Test
    void raw_batchingModel_getsABatchOfOne() throws Exception {
        byte[] in = new byte[2 * 3 * 4];
        in[0] = 7;
        HttpResponse<byte[]> r = post("/v2/models/batched/infer", in, "Inference-Header-Content-Length", "0");
        assertEquals(200, r.statusCode(), new String(r.body(), StandardCharsets.UTF_8));
        assertEquals("[1,2,3]", header(r).get("outputs").get(0).get("shape").toString());
        assertArrayEquals(in, tail(r));
    }

    @Test
    void raw_bytesInputOfShapeOne_theBodyIsItsOneElement() throws Exception {
        HttpResponse<byte[]> r = post("/v2/models/string1/infer", "427".getBytes(StandardCharsets.UTF_8), "Inference-Header-Content-Length", "0");
        assertEquals(200, r.statusCode(), new String(r.body(), StandardCharsets.UTF_8));
        byte[] t = tail(r);
        // a BYTES output in binary form: a 4-byte little-endian length, then the element
        assertEquals(3, ByteBuffer.wrap(t, 0, 4).order(ByteOrder.LITTLE_ENDIAN).getInt());
        assertEquals("427", new String(t, 4, t.length - 4, StandardCharsets.UTF_8));
    }

    @Test
    void raw_undeducibleRequests_400InTritonsWords() throws Exception {
        HttpResponse<byte[]> two = post("/v2/models/two/infer", floats(24), "Inference-Header-Content-Length", "0");
        assertEquals(400, two.statusCode());
        assertTrue(error(two).contains("Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'two' model configuration"),
                error(two));
        HttpResponse<byte[]> variable = post("/v2/models/two_variable/infer", new byte[8], "Inference-Header-Content-Length", "0");
        assertEquals(400, variable.statusCode());
        assertTrue(error(variable).contains("The shape of the raw input 'IN0' can not be deduced because there are more than one variable-sized"
                + " dimension"), error(variable));
        HttpResponse<byte[]> strings = post("/v2/models/one_string/infer", "427".getBytes(StandardCharsets.UTF_8), "Inference-Header-Content-Length", "0");
        assertEquals(400, strings.statusCode());
        assertTrue(error(strings).contains("For BYTE datatype raw input 'IN0', the model must have input shape [1]"), error(strings));
        HttpResponse<byte[]> ragged = post("/v2/models/identity/infer", new byte[10], "Inference-Header-Content-Length", "0");
        assertEquals(400, ragged.statusCode());
        assertTrue(error(ragged).contains("10 bytes are not a whole number of FP32 elements"), error(ragged));
        HttpResponse<byte[]> fixed = post("/v2/models/fixed/infer", floats(3), "Inference-Header-Content-Length", "0");
        assertEquals(400, fixed.statusCode());
        assertTrue(error(fixed).contains("12 bytes, but dims [4] of FP32 need 16 bytes"), error(fixed));
        HttpResponse<byte[]> ok = post("/v2/models/fixed/infer", floats(4), "Inference-Header-Content-Length", "0");
        assertEquals(200, ok.statusCode(), "the host still serves");
    }

    @Test
    void raw_overTheLimit_400FromTheHeaders() throws Exception {
        HttpResponse<byte[]> r = post("/v2/models/identity/infer", new byte[LIMIT + 4], "Inference-Header-Content-Length", "0");
        assertEquals(400, r.statusCode());
        assertTrue(error(r).contains("Raw input has a byte_size (" + (LIMIT + 4) + " bytes) that exceeds the maximum allowed value of " + LIMIT
                + " bytes"), error(r));
    }

    private static byte[] gzip(byte[] b) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream z = new GZIPOutputStream(out)) {
            z.write(b);
        }
        return out.toByteArray();
    }

    private static byte[] deflate(byte[] b) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DeflaterOutputStream z = new DeflaterOutputStream(out)) {
            z.write(b);
        }
        return out.toByteArray();
    }

    private static final byte[] INFER = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1.5,2.5]}]}"
            .getBytes(StandardCharsets.UTF_8);

    @Test
    void compressedBodies_gzipAndDeflate_inflatedBeforeTheyAreRead() throws Exception {
        HttpResponse<byte[]> g = post("/v2/models/identity/infer", gzip(INFER), "Content-Encoding", "gzip", "Content-Type", "application/json");
        assertEquals(200, g.statusCode(), new String(g.body(), StandardCharsets.UTF_8));
        assertEquals("[1.5,2.5]", JSON.readTree(g.body()).get("outputs").get(0).get("data").toString());
        HttpResponse<byte[]> d = post("/v2/models/identity/infer", deflate(INFER), "Content-Encoding", "deflate");
        assertEquals(200, d.statusCode(), new String(d.body(), StandardCharsets.UTF_8));
    }

    @Test
    void compressedBodies_inflatingPastTheLimit_400_corruptOrUnknown_400NamingThem() throws Exception {
        // 64 KiB + 1 of spaces compresses to a few hundred bytes: refused once inflating passes the limit
        byte[] padded = new byte[LIMIT + 1];
        Arrays.fill(padded, (byte) ' ');
        System.arraycopy(INFER, 0, padded, 0, INFER.length);
        HttpResponse<byte[]> big = post("/v2/models/identity/infer", gzip(padded), "Content-Encoding", "gzip");
        assertEquals(400, big.statusCode());
        assertTrue(error(big).contains("Decompressed data size exceeds the maximum allowed value of " + LIMIT + " bytes"), error(big));
        HttpResponse<byte[]> corrupt = post("/v2/models/identity/infer", INFER, "Content-Encoding", "gzip");
        assertEquals(400, corrupt.statusCode());
        assertTrue(error(corrupt).contains("is corrupt or cut short"), error(corrupt));
        HttpResponse<byte[]> unknown = post("/v2/models/identity/infer", INFER, "Content-Encoding", "compress");
        assertEquals(400, unknown.statusCode());
        assertTrue(error(unknown).contains("Content-Encoding 'compress' is not supported"), error(unknown));
        assertEquals(200, post("/v2/models/identity/infer", INFER).statusCode(), "the host still serves");
    }

    private static String nested(int depth, String leaf) {
        return "[".repeat(depth) + leaf + "]".repeat(depth);
    }

    @Test
    void nesting_deeperThanTritonsLimit_400_shallowServed() throws Exception {
        String deep = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":" + nested(120, "1") + "}]}";
        HttpResponse<byte[]> r = post("/v2/models/identity/infer", deep.getBytes(StandardCharsets.UTF_8));
        assertEquals(400, r.statusCode());
        assertTrue(error(r).contains("JSON nesting depth exceeds maximum allowed limit (100)"), error(r));
        String shallow = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":" + nested(50, "1") + "}]}";
        assertEquals(200, post("/v2/models/identity/infer", shallow.getBytes(StandardCharsets.UTF_8)).statusCode());
    }

    @Test
    void repositoryIndex_readyNotABoolean_refusedFromItsFirstToken() throws Exception {
        String body = "{\"ready\":" + nested(20_000, "true") + "}";
        HttpResponse<byte[]> r = post("/v2/repository/index", body.getBytes(StandardCharsets.UTF_8));
        assertEquals(400, r.statusCode());
        assertTrue(error(r).contains("Invalid value for 'ready': expected a boolean"), error(r));
        HttpResponse<byte[]> ok = post("/v2/repository/index", "{\"ready\":true}".getBytes(StandardCharsets.UTF_8));
        assertEquals(200, ok.statusCode());
        assertEquals(7, JSON.readTree(ok.body()).size());
    }

    @Test
    void elementAndByteOverflow_400InTritonsWords() throws Exception {
        String elements = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[16," + ((1L << 60) + 2) + "],\"data\":[1.0]}]}";
        HttpResponse<byte[]> e = post("/v2/models/identity/infer", elements.getBytes(StandardCharsets.UTF_8));
        assertEquals(400, e.statusCode());
        assertTrue(error(e).contains("causes total element count to exceed maximum size of"), error(e));
        String bytes = "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[4," + ((1L << 60) + 2) + "],\"data\":[1.0]}]}";
        HttpResponse<byte[]> b = post("/v2/models/identity/infer", bytes.getBytes(StandardCharsets.UTF_8));
        assertEquals(400, b.statusCode());
        assertTrue(error(b).contains("byte size overflow for input 'IN0'"), error(b));
    }

    @Test
    void generate_withTheBinaryHeader_stillBoundByTheJsonLimit() throws Exception {
        byte[] big = new byte[LIMIT + 10];
        Arrays.fill(big, (byte) ' ');
        big[0] = '{';
        big[big.length - 1] = '}';
        HttpResponse<byte[]> r = post("/v2/models/identity/generate", big, "Inference-Header-Content-Length", Integer.toString(big.length));
        assertEquals(400, r.statusCode());
        assertTrue(error(r).contains("request JSON size of " + big.length + " bytes exceeds the maximum allowed input size of " + LIMIT), error(r));
    }
}
