package io.backplane.plugin.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.core.BackplaneHost;
import io.backplane.spi.DataType;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The openai frontend over a real host and real HTTP: the routes, the convention's inputs as each
 * model declares them, streaming as OpenAI streams, errors as OpenAI's, the key and the restricted
 * groups, cancellation by disconnect, unload and model errors mid-stream, and many streams at once.
 */
class OpenAiFrontendTest {
    private final LlmBackend backend = new LlmBackend();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    private BackplaneHost host;
    private OpenAiFrontend frontend;

    @TempDir
    Path tokenizer;

    /** Llama-2's way: roles must alternate, else the template raises. */
    private static final String TEMPLATE = "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
            + "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
            + "{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + m['content'] | trim + ' [/INST]' }}{% else %}{{ ' ' + m['content'] | trim + ' ' + eos_token }}"
            + "{% endif %}{% endfor %}";

    private long budget = -1;

    private void start(Map<String, String> options) throws Exception {
        Files.writeString(tokenizer.resolve("tokenizer_config.json"), Json.MAPPER.createObjectNode().put("chat_template", TEMPLATE)
                .put("bos_token", "<s>").put("eos_token", "</s>").toString());
        host = BackplaneHost.builder().backend(backend).unloadTimeout(Duration.ofSeconds(2))
                .model(LlmBackend.vllm("vllm")).model(LlmBackend.trtllm("trt")).model(LlmBackend.embedding("embed"))
                .model(LlmBackend.vllm("chat").toBuilder().parameter("tokenizer", tokenizer.toString()).build())
                .loadModel("vllm").loadModel("trt").loadModel("embed").loadModel("chat").memoryBudget(budget > 0 ? budget : 1L << 30).build();
        Map<String, String> o = new HashMap<>(options);
        o.putIfAbsent("host", "127.0.0.1");
        o.putIfAbsent("port", "0");
        o.putIfAbsent("drain_timeout_ms", "2000");
        frontend = (OpenAiFrontend) new OpenAiFrontendFactory().create(context(host, o));
        frontend.start();
    }

    @AfterEach
    void close() {
        if (frontend != null) {
            frontend.close();
        }
        if (host != null) {
            host.close();
        }
        assertTrue(backend.problems.isEmpty(), backend.problems.toString());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        List<String> left = threads();
        while (!left.isEmpty() && System.nanoTime() < end) {
            Thread.onSpinWait();
            left = threads();
        }
        assertEquals(List.of(), left, "openai frontend threads left after close");
    }

    private static List<String> threads() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith("backplane-openai")).toList();
    }

    static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }

    private URI uri(String path) {
        return URI.create("http://127.0.0.1:" + frontend.port() + path);
    }

    private HttpResponse<String> post(String path, String body, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(path)).POST(HttpRequest.BodyPublishers.ofString(body)).header("content-type", "application/json");
        if (headers.length > 0) {
            b.headers(headers);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> get(String path, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(path)).GET();
        if (headers.length > 0) {
            b.headers(headers);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static JsonNode json(HttpResponse<String> r) throws Exception {
        return Json.MAPPER.readTree(r.body());
    }

    /** The events of an SSE body: each {@code data:} payload, in order. */
    private static List<String> events(String body) {
        List<String> out = new ArrayList<>();
        for (String block : body.split("\n\n")) {
            if (block.startsWith("data: ")) {
                out.add(block.substring(6));
            } else if (!block.isBlank()) {
                fail("not an SSE event: " + block);
            }
        }
        return out;
    }

    private static void assertError(HttpResponse<String> r, int status, String type, String... words) throws Exception {
        assertEquals(status, r.statusCode(), r.body());
        JsonNode e = json(r).get("error");
        assertNotNull(e, r.body());
        assertEquals(type, e.get("type").asText(), r.body());
        for (String w : words) {
            assertTrue(e.get("message").asText().contains(w), "'" + w + "' not in " + r.body());
        }
    }

    @Test
    void models_listsTheReadyModels_andOne() throws Exception {
        start(Map.of());
        JsonNode list = json(get("/v1/models"));
        assertEquals("list", list.get("object").asText());
        List<String> ids = new ArrayList<>();
        list.get("data").forEach(m -> ids.add(m.get("id").asText()));
        assertTrue(ids.containsAll(List.of("vllm", "trt", "embed", "chat")), ids.toString());
        JsonNode one = json(get("/v1/models/vllm"));
        assertEquals("model", one.get("object").asText());
        assertEquals("vllm", one.get("id").asText());
        assertError(get("/v1/models/nope"), 404, "invalid_request_error", "nope");
    }

    @Test
    void completion_vllmConvention_sendsExactlyTheDeclaredInputs_andCountsUsage() throws Exception {
        start(Map.of());
        HttpResponse<String> r = post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"hello there\",\"max_tokens\":3,\"temperature\":0,\"top_k\":5,\"user\":\"u\"}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode c = json(r);
        assertEquals("text_completion", c.get("object").asText());
        assertEquals("you said: hello", c.at("/choices/0/text").asText());
        assertEquals("length", c.at("/choices/0/finish_reason").asText());
        assertEquals(2, c.at("/usage/prompt_tokens").asInt());
        assertEquals(3, c.at("/usage/completion_tokens").asInt());
        assertEquals(5, c.at("/usage/total_tokens").asInt());
        Map<String, LlmBackend.Input> in = backend.seen.poll(10, TimeUnit.SECONDS);
        assertNotNull(in);
        assertEquals(List.of("text_input", "stream", "sampling_parameters", "exclude_input_in_output", "return_num_input_tokens",
                "return_num_output_tokens"), List.copyOf(in.keySet()));
        for (LlmBackend.Input i : in.values()) {
            assertEquals(List.of(1L), i.shape(), i.toString());
        }
        assertEquals("[false]", in.get("stream").value());
        assertEquals("[true]", in.get("exclude_input_in_output").value());
        JsonNode sp = Json.MAPPER.readTree(in.get("sampling_parameters").value());
        assertEquals(3, sp.get("max_tokens").asInt());
        assertEquals(0, sp.get("temperature").asInt());
        assertEquals(5, sp.get("top_k").asInt());
        assertNull(sp.get("user"), "user is not a sampling parameter");
        assertNull(sp.get("prompt"));
        assertNull(sp.get("model"));
    }

    @Test
    void completion_trtllmConvention_shapesAsDeclared_andOptionalInputsOnlyWhenGiven() throws Exception {
        start(Map.of());
        HttpResponse<String> r = post("/v1/completions", "{\"model\":\"trt\",\"prompt\":\"a b c d e\",\"max_tokens\":4,\"temperature\":0.5}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("you said: a b", json(r).at("/choices/0/text").asText());
        assertTrue(json(r).get("usage").isNull(), "the model counts no tokens and the frontend has no tokenizer: " + r.body());
        Map<String, LlmBackend.Input> in = backend.seen.poll(10, TimeUnit.SECONDS);
        assertNotNull(in);
        assertEquals(List.of("text_input", "max_tokens", "stream", "temperature"), List.copyOf(in.keySet()), "top_p and stop_words were not given");
        assertEquals(List.of(1L, 1L), in.get("text_input").shape());
        assertEquals(DataType.INT32, in.get("max_tokens").type());
        assertEquals("[4]", in.get("max_tokens").value());
        assertEquals(DataType.FP32, in.get("temperature").type());
        assertEquals("[0.5]", in.get("temperature").value());

        assertEquals(200, post("/v1/completions", "{\"model\":\"trt\",\"prompt\":\"x\",\"stop\":[\"a\",\"bb\"]}").statusCode());
        in = backend.seen.poll(10, TimeUnit.SECONDS);
        assertNotNull(in);
        assertEquals(List.of(1L, 2L), in.get("stop_words").shape());
        assertEquals("a|bb", in.get("stop_words").value());
        assertEquals("[16]", in.get("max_tokens").value(), "the default max_tokens is Triton's 16");
    }

    @Test
    void completion_stream_isOpenAisEventStream_withUsageWhenAsked() throws Exception {
        start(Map.of());
        HttpResponse<String> r = post("/v1/completions",
                "{\"model\":\"vllm\",\"prompt\":\"one two\",\"stream\":true,\"max_tokens\":10,\"stream_options\":{\"include_usage\":true}}");
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.headers().firstValue("content-type").orElse("").startsWith("text/event-stream"));
        List<String> ev = events(r.body());
        assertEquals("[DONE]", ev.getLast());
        StringBuilder text = new StringBuilder();
        for (String e : ev.subList(0, ev.size() - 3)) {
            JsonNode c = Json.MAPPER.readTree(e);
            assertEquals("text_completion", c.get("object").asText());
            assertTrue(c.at("/choices/0/finish_reason").isNull());
            text.append(c.at("/choices/0/text").asText());
        }
        assertEquals("you said: one two", text.toString());
        JsonNode last = Json.MAPPER.readTree(ev.get(ev.size() - 3));
        assertEquals("stop", last.at("/choices/0/finish_reason").asText());
        JsonNode usage = Json.MAPPER.readTree(ev.get(ev.size() - 2));
        assertEquals(0, usage.get("choices").size());
        assertEquals(2, usage.at("/usage/prompt_tokens").asInt());
        assertEquals(4, usage.at("/usage/completion_tokens").asInt(), "completion tokens are summed over the chunks");
    }

    @Test
    void completion_echo_sendsExcludeInputFalse() throws Exception {
        start(Map.of());
        assertEquals(200, post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"p\",\"echo\":true}").statusCode());
        Map<String, LlmBackend.Input> in = backend.seen.poll(10, TimeUnit.SECONDS);
        assertNotNull(in);
        assertEquals("[false]", in.get("exclude_input_in_output").value());
    }

    @Test
    void chat_withoutATemplate_isRefusedNamingWhereToPutOne() throws Exception {
        start(Map.of());
        assertError(post("/v1/chat/completions", "{\"model\":\"vllm\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), 400,
                "invalid_request_error", "chat template", "tokenizer");
    }

    @Test
    void chat_rendersTheModelsTemplate_andItsRefusalIsA400() throws Exception {
        start(Map.of());
        HttpResponse<String> r = post("/v1/chat/completions", "{\"model\":\"chat\",\"max_tokens\":100,\"messages\":["
                + "{\"role\":\"user\",\"content\":\" hi \"},{\"role\":\"assistant\",\"content\":\"yo\"},"
                + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"and {{ you }}\"}]}]}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode c = json(r);
        assertEquals("chat.completion", c.get("object").asText());
        assertEquals("assistant", c.at("/choices/0/message/role").asText());
        Map<String, LlmBackend.Input> in = backend.seen.poll(10, TimeUnit.SECONDS);
        assertNotNull(in);
        assertEquals("<s>[INST] hi [/INST] yo </s><s>[INST] and {{ you }} [/INST]", in.get("text_input").value(),
                "the template rendered, text parts joined, message text never interpreted as a template");
        assertEquals("you said: " + in.get("text_input").value(), c.at("/choices/0/message/content").asText());
        assertError(post("/v1/chat/completions", "{\"model\":\"chat\",\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}"), 400,
                "invalid_request_error", "Conversation roles must alternate");
    }

    @Test
    void chat_streamed_firstChunkIsTheRole_thenTheContent() throws Exception {
        start(Map.of());
        HttpResponse<String> r = post("/v1/chat/completions",
                "{\"model\":\"chat\",\"stream\":true,\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
        List<String> ev = events(r.body());
        JsonNode first = Json.MAPPER.readTree(ev.getFirst());
        assertEquals("chat.completion.chunk", first.get("object").asText());
        assertEquals("assistant", first.at("/choices/0/delta/role").asText());
        assertEquals("", first.at("/choices/0/delta/content").asText());
        StringBuilder content = new StringBuilder();
        for (String e : ev.subList(1, ev.size() - 2)) {
            content.append(Json.MAPPER.readTree(e).at("/choices/0/delta/content").asText());
        }
        assertEquals("you said: <s>[INST]", content.toString());
        assertEquals("length", Json.MAPPER.readTree(ev.get(ev.size() - 2)).at("/choices/0/finish_reason").asText());
        assertEquals("[DONE]", ev.getLast());
    }

    @Test
    void errors_areOpenAisErrorObjects_withTheirStatus() throws Exception {
        start(Map.of("max_body_bytes", "4096"));
        assertError(post("/v1/completions", "{\"model\":\"nope\",\"prompt\":\"x\"}"), 404, "invalid_request_error", "nope");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\""), 400, "invalid_request_error", "not valid JSON");
        assertError(post("/v1/completions", "[1]"), 400, "invalid_request_error", "JSON object");
        assertError(post("/v1/completions", "{\"prompt\":\"x\"}"), 400, "invalid_request_error", "'model' is required");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\",\"n\":2}"), 400, "invalid_request_error", "'n'");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":[1,2]}"), 400, "invalid_request_error", "token ids");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\",\"max_tokens\":0}"), 400, "invalid_request_error", "max_tokens");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}"), 400,
                "invalid_request_error", "stream_options");
        assertError(post("/v1/completions", "{\"model\":\"embed\",\"prompt\":\"x\"}"), 400, "invalid_request_error", "embed");
        assertError(post("/v1/chat/completions", "{\"model\":\"vllm\",\"messages\":[]}"), 400, "invalid_request_error", "messages");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"" + "x".repeat(5000) + "\"}"), 413, "invalid_request_error", "4096");
        assertError(get("/v1/completions"), 405, "invalid_request_error", "POST");
        assertError(get("/v1/nothing"), 404, "invalid_request_error", "/v1/models");
        // the server still serves after all of them
        assertEquals(200, post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\"}").statusCode());
    }

    @Test
    void apiKey_isCheckedAsABearerToken_andRestrictedGroupsNeedTheirHeader() throws Exception {
        start(Map.of("api_key", "sk-test", "restricted_api", "model-repository:admin-key=s3cret"));
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\"}"), 401, "authentication_error", "Authorization: Bearer");
        assertError(post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\"}", "authorization", "Bearer wrong"), 401, "authentication_error");
        assertEquals(200, post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\"}", "authorization", "Bearer sk-test").statusCode());
        assertError(get("/v1/models", "authorization", "Bearer sk-test"), 403, "permission_error", "admin-key");
        assertEquals(200, get("/v1/models", "authorization", "Bearer sk-test", "admin-key", "s3cret").statusCode());
        assertEquals(200, get("/health/ready").statusCode(), "health asks for no key");
    }

    @Test
    void modelErrorMidStream_endsThatStreamWithAnErrorEvent_andNoOtherNotices() throws Exception {
        start(Map.of());
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<HttpResponse<String>> bad = pool.submit(() -> post("/v1/completions",
                    "{\"model\":\"vllm\",\"prompt\":\"FAIL_MID a b c\",\"stream\":true,\"max_tokens\":10}"));
            Future<HttpResponse<String>> good = pool.submit(() -> post("/v1/completions",
                    "{\"model\":\"vllm\",\"prompt\":\"fine a b c\",\"stream\":true,\"max_tokens\":10}"));
            List<String> ev = events(bad.get(30, TimeUnit.SECONDS).body());
            assertEquals(3, ev.size(), ev.toString());
            JsonNode err = Json.MAPPER.readTree(ev.getLast());
            assertTrue(err.at("/error/message").asText().contains("FAIL_MID"), ev.toString());
            assertFalse(ev.contains("[DONE]"), "a failed stream does not end with [DONE]");
            List<String> ok = events(good.get(30, TimeUnit.SECONDS).body());
            assertEquals("[DONE]", ok.getLast());
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void clientThatDisconnects_cancelsTheGeneration_inTheModel() throws Exception {
        start(Map.of());
        String body = "{\"model\":\"vllm\",\"prompt\":\"FOREVER disconnect\",\"stream\":true}";
        try (Socket s = new Socket("127.0.0.1", frontend.port())) {
            OutputStream out = s.getOutputStream();
            out.write(("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: " + body.length() + "\r\n\r\n" + body)
                    .getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            String seen = "";
            byte[] buf = new byte[4096];
            while (!seen.contains(" t1")) {
                int n = in.read(buf);
                assertTrue(n > 0, "the stream ended early: " + seen);
                seen += new String(buf, 0, n, StandardCharsets.UTF_8);
            }
        }
        String c = backend.cancelled.poll(30, TimeUnit.SECONDS);
        assertNotNull(c, "the model never saw the client go away");
        assertTrue(c.startsWith("FOREVER disconnect after "), c);
        assertEquals(0, awaitOpen(0), "the frontend still holds the request");
    }

    @Test
    void unloadMidStream_endsTheStreamWithAnErrorEvent() throws Exception {
        start(Map.of());
        HttpRequest req = HttpRequest.newBuilder(uri("/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"vllm\",\"prompt\":\"FOREVER unload\",\"stream\":true}")).build();
        HttpResponse<Stream<String>> r = http.send(req, HttpResponse.BodyHandlers.ofLines());
        assertEquals(200, r.statusCode());
        List<String> lines = new ArrayList<>();
        try (Stream<String> s = r.body()) {
            var it = s.iterator();
            boolean unloaded = false;
            while (it.hasNext()) {
                String line = it.next();
                lines.add(line);
                if (!unloaded && line.contains(" t2")) {
                    unloaded = true;
                    Thread.ofVirtual().start(() -> host.unload("vllm"));
                }
            }
        }
        String last = lines.stream().filter(l -> l.startsWith("data: ")).reduce((a, b) -> b).orElseThrow();
        assertTrue(last.contains("\"error\""), "the stream ended without an error event: " + last);
        assertNotNull(backend.cancelled.poll(30, TimeUnit.SECONDS));
    }

    @Test
    void manyStreamsAtOnce_eachEndsExactlyOnce_withItsOwnText() throws Exception {
        start(Map.of());
        int n = 24;
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<String>> all = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int id = i;
                all.add(pool.submit(() -> {
                    if (ThreadLocalRandom.current().nextBoolean()) {
                        Thread.yield();
                    }
                    boolean stream = id % 2 == 0;
                    HttpResponse<String> r = post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"req " + id + " w w\",\"max_tokens\":50,\"stream\":" + stream + "}");
                    assertEquals(200, r.statusCode(), r.body());
                    if (!stream) {
                        return json(r).at("/choices/0/text").asText();
                    }
                    StringBuilder text = new StringBuilder();
                    List<String> ev = events(r.body());
                    assertEquals("[DONE]", ev.getLast());
                    assertEquals(1, ev.stream().filter("[DONE]"::equals).count());
                    for (String e : ev.subList(0, ev.size() - 1)) {
                        text.append(Json.MAPPER.readTree(e).at("/choices/0/text").asText());
                    }
                    return text.toString();
                }));
            }
            for (int i = 0; i < n; i++) {
                assertEquals("you said: req " + i + " w w", all.get(i).get(60, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(0, awaitOpen(0));
    }

    @Test
    void embeddings_asFloats_andAsBase64() throws Exception {
        start(Map.of());
        JsonNode r = json(post("/v1/embeddings", "{\"model\":\"embed\",\"input\":[\"ab\",\"xyz\"]}"));
        assertEquals("list", r.get("object").asText());
        assertEquals(2, r.get("data").size());
        assertEquals(2.0, r.at("/data/0/embedding/0").asDouble());
        assertEquals((double) 'x', r.at("/data/1/embedding/1").asDouble());
        assertEquals(1, r.at("/data/1/index").asInt());
        JsonNode b = json(post("/v1/embeddings", "{\"model\":\"embed\",\"input\":\"abc\",\"encoding_format\":\"base64\"}"));
        ByteBuffer bytes = ByteBuffer.wrap(Base64.getDecoder().decode(b.at("/data/0/embedding").asText())).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(3.0f, bytes.getFloat(0));
        assertEquals(-1.0f, bytes.getFloat(12));
        assertError(post("/v1/embeddings", "{\"model\":\"embed\",\"input\":[1,2]}"), 400, "invalid_request_error", "token ids");
        assertError(post("/v1/embeddings", "{\"model\":\"vllm\",\"input\":\"x\"}"), 400, "invalid_request_error", "decoupled");
    }

    @Test
    void close_endsAnOpenStream_withinTheDrainDeadline() throws Exception {
        start(Map.of("drain_timeout_ms", "200"));
        HttpRequest req = HttpRequest.newBuilder(uri("/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"vllm\",\"prompt\":\"FOREVER close\",\"stream\":true}")).build();
        HttpResponse<Stream<String>> r = http.send(req, HttpResponse.BodyHandlers.ofLines());
        List<String> lines = new ArrayList<>();
        try (Stream<String> s = r.body()) {
            var it = s.iterator();
            boolean closing = false;
            while (it.hasNext()) {
                String line = it.next();
                lines.add(line);
                if (!closing && line.contains(" t1")) {
                    closing = true;
                    Thread.ofVirtual().start(frontend::close);
                }
            }
        }
        assertTrue(lines.stream().anyMatch(l -> l.contains("shutting down")), lines.toString());
        assertNotNull(backend.cancelled.poll(30, TimeUnit.SECONDS), "the model was not told");
    }

    @Test
    void pipelinedRequests_areAnsweredInOrder_neverInsideAnotherAnswer() throws Exception {
        start(Map.of());
        String body = "{\"model\":\"vllm\",\"prompt\":\"one two three\",\"stream\":true}";
        String both = "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: " + body.length()
                + "\r\n\r\n" + body + "GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n";
        try (Socket s = new Socket("127.0.0.1", frontend.port())) {
            s.setSoTimeout(30_000);
            s.getOutputStream().write(both.getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            InputStream in = s.getInputStream();
            StringBuilder got = new StringBuilder();
            byte[] buf = new byte[4096];
            while (!got.toString().contains("\"object\":\"list\"")) {
                int n = in.read(buf);
                assertTrue(n > 0, "the connection ended: " + got);
                got.append(new String(buf, 0, n, StandardCharsets.UTF_8));
            }
            String all = got.toString();
            int done = all.indexOf("data: [DONE]");
            int second = all.indexOf("HTTP/1.1 200", 1);
            assertTrue(done > 0 && second > done, "the second answer came before the first one ended: " + all);
        }
    }

    @Test
    void memoryBudget_refusesABodyItCannotHold_with503_andHoldsEachBodyUntilItsAnswer() throws Exception {
        budget = 64 * 1024;
        start(Map.of());
        String big = "{\"model\":\"vllm\",\"prompt\":\"" + "x".repeat(100_000) + "\"}";
        assertError(post("/v1/completions", big), 503, "service_unavailable_error");
        HttpRequest req = HttpRequest.newBuilder(uri("/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"vllm\",\"prompt\":\"FOREVER budget\",\"stream\":true}")).build();
        HttpResponse<Stream<String>> r = http.send(req, HttpResponse.BodyHandlers.ofLines());
        try (Stream<String> lines = r.body()) {
            var it = lines.iterator();
            while (it.hasNext() && !it.next().contains(" t1")) {
                Thread.onSpinWait();
            }
            assertTrue(host.memoryUsage().heldBytes() > 0, "the stream's body is no longer held while it is answered");
        }
        assertNotNull(backend.cancelled.poll(30, TimeUnit.SECONDS));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (host.memoryUsage().heldBytes() != 0 && System.nanoTime() < end) {
            Thread.onSpinWait();
        }
        assertEquals(0, host.memoryUsage().heldBytes(), "bytes still held after every answer");
        assertEquals(200, post("/v1/completions", "{\"model\":\"vllm\",\"prompt\":\"x\"}").statusCode());
    }

    @Test
    void malformedHeaders_are400_andAnIdleConnectionIsClosed() throws Exception {
        start(Map.of("idle_timeout_ms", "300"));
        try (Socket s = new Socket("127.0.0.1", frontend.port())) {
            s.setSoTimeout(30_000);
            s.getOutputStream().write(("GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: " + "y".repeat(70_000) + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            String head = new String(s.getInputStream().readNBytes(12), StandardCharsets.US_ASCII);
            assertEquals("HTTP/1.1 400", head);
        }
        try (Socket s = new Socket("127.0.0.1", frontend.port())) {
            s.setSoTimeout(30_000);
            assertEquals(-1, s.getInputStream().read(), "an idle connection is closed by the server");
        }
    }

    private int awaitOpen(int want) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (frontend.openRequests() != want && System.nanoTime() < end) {
            Thread.onSpinWait();
        }
        return frontend.openRequests();
    }
}
