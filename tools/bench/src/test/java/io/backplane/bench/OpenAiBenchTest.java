package io.backplane.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.backplane.testkit.Await;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The generation mode against a fake OpenAI server in the test (the JDK's HTTP server on
 * loopback): each base path streams {@value #K} content chunks its own way. Counts and fields are
 * checked; no timing figure is, and nothing sleeps: the one test about timing order holds the
 * server on latches that the test releases when the client has read what came before.
 */
class OpenAiBenchTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int K = 5;
    private static final Duration DEADLINE = Duration.ofSeconds(30);
    private static HttpServer server;
    private static ExecutorService handlers;
    private static String base;
    private static final List<JsonNode> bodies = new CopyOnWriteArrayList<>();
    private static volatile CountDownLatch gate1 = new CountDownLatch(0);
    private static volatile CountDownLatch gate2 = new CountDownLatch(0);

    @BeforeAll
    static void start() throws IOException {
        // each event its own packet at once, as a streaming server sends it (read when the server's classes load)
        System.setProperty("sun.net.httpserver.nodelay", "true");
        AtomicInteger n = new AtomicInteger();
        handlers = Executors.newCachedThreadPool(r -> new Thread(r, "fake-openai-" + n.incrementAndGet()));
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.setExecutor(handlers);
        for (String mode : List.of("/usage", "/deltas", "/nousage", "/key", "/crash", "/nodone", "/json", "/gated")) {
            server.createContext(mode, ex -> {
                try (ex) {
                    serve(ex, mode);
                } catch (IOException | RuntimeException e) {
                    // the client went away: nothing to answer
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        server.start();
        base = "http://127.0.0.1:" + server.getAddress().getPort();
    }

    @AfterAll
    static void stop() throws InterruptedException {
        gate1.countDown();
        gate2.countDown();
        server.stop(0);
        handlers.shutdownNow();
        assertTrue(handlers.awaitTermination(30, TimeUnit.SECONDS), "the fake server's handlers to end");
    }

    @AfterEach
    void nothingLeftOpen() {
        gate1.countDown();
        gate2.countDown();
        Await.until(() -> Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .noneMatch(t -> t.startsWith("HttpClient-")), DEADLINE, "the HTTP client's threads to end after the run");
    }

    private static void serve(HttpExchange ex, String mode) throws IOException, InterruptedException {
        byte[] request = ex.getRequestBody().readAllBytes();
        if (ex.getRequestMethod().equals("GET")) { // the reachability probe, /v1/models
            ex.sendResponseHeaders(404, -1);
            return;
        }
        JsonNode body = JSON.readTree(request);
        bodies.add(body);
        boolean chat = ex.getRequestURI().getPath().endsWith("/v1/chat/completions");
        if (mode.equals("/key") && !"Bearer secret".equals(ex.getRequestHeaders().getFirst("Authorization"))) {
            byte[] error = "{\"error\":{\"message\":\"Incorrect API key provided\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_api_key\"}}"
                    .getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(401, error.length);
            ex.getResponseBody().write(error);
            return;
        }
        if (mode.equals("/json")) {
            byte[] whole = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}]}".getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(200, whole.length);
            ex.getResponseBody().write(whole);
            return;
        }
        ex.getResponseHeaders().set("Content-Type", "text/event-stream");
        ex.sendResponseHeaders(200, 0);
        OutputStream out = ex.getResponseBody();
        String eol = mode.equals("/nousage") ? "\r\n" : "\n";
        if (chat) {
            event(out, eol, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}");
        }
        if (mode.equals("/gated") && !gate1.await(DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
            return;
        }
        for (int i = 1; i <= K; i++) {
            String choice = chat ? "{\"index\":0,\"delta\":{\"content\":\"tok" + i + " \"},\"finish_reason\":null}"
                    : "{\"index\":0,\"text\":\"tok" + i + " \",\"finish_reason\":null}";
            String usage = mode.equals("/deltas") ? "{\"prompt_tokens\":7,\"completion_tokens\":" + 2 * i + ",\"total_tokens\":" + (7 + 2 * i) + "}" : "null";
            if (mode.equals("/nousage")) {
                // one JSON object over two data lines, and a comment: SSE framing, not line-per-chunk
                out.write((": keep-alive" + eol + "data: {\"choices\":[" + eol + "data: " + choice + "]}" + eol + eol).getBytes(StandardCharsets.UTF_8));
                out.flush();
            } else {
                event(out, eol, "{\"choices\":[" + choice + "],\"usage\":" + usage + "}");
            }
            if (mode.equals("/crash") && i == 2) {
                event(out, eol, "{\"error\":{\"message\":\"model crashed\",\"type\":\"server_error\",\"code\":null}}");
                return;
            }
            if (mode.equals("/gated") && i == 1 && !gate2.await(DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
                return;
            }
        }
        if (mode.equals("/nodone")) {
            return;
        }
        if (!mode.equals("/nousage")) {
            int tokens = mode.equals("/deltas") ? 2 * K : K;
            event(out, eol, "{\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" + tokens + ",\"total_tokens\":" + (7 + tokens) + "}}");
        }
        event(out, eol, "[DONE]");
    }

    private static void event(OutputStream out, String eol, String data) throws IOException {
        out.write(("data: " + data + eol + eol).getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private record Exit(int status, String out, String err) {
    }

    private static Exit bench(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = BenchCli.execute(args, new PrintWriter(out, true), new PrintWriter(err, true));
        return new Exit(status, out.toString(), err.toString());
    }

    /** Two levels of a count each, the duration only a limit; then {@code args}. */
    private static String[] quick(String path, String... args) {
        List<String> all = new ArrayList<>(List.of("--openai-url", base + path, "--model", "fake-llm", "--concurrency", "1,2", "--request-count", "6",
                "--duration-s", "120", "--warmup-s", "0"));
        all.addAll(List.of(args));
        return all.toArray(String[]::new);
    }

    private static JsonNode json(Exit e) throws IOException {
        assertEquals("", e.err());
        return JSON.readTree(e.out());
    }

    @Test
    void chat_usageInTheLastChunk_outputTokensFromUsage_itlOneTokenPerChunk() throws Exception {
        bodies.clear();
        Exit e = bench(quick("/usage", "--format", "json", "--max-tokens", "64", "--prompt", "Say hi."));
        assertEquals(0, e.status(), e.err() + e.out());
        JsonNode doc = json(e);
        assertEquals("openai " + base + "/usage/v1/chat/completions", doc.get("target").asText());
        assertEquals(64, doc.get("max_tokens").asInt());
        assertEquals(2, doc.get("levels").size());
        for (JsonNode l : doc.get("levels")) {
            long requests = l.get("requests").asLong();
            assertTrue(requests >= 6, l.toString());
            assertEquals(0, l.get("errors").asLong(), l.toString());
            assertEquals(K * requests, l.get("output_tokens").asLong(), l.toString());
            assertEquals(K * requests, l.get("content_chunks").asLong(), "the role-only chunk is not content: " + l);
            assertEquals((double) K, l.get("mean_output_tokens").asDouble(), l.toString());
            assertEquals("usage", l.get("output_tokens_from").asText(), l.toString());
            assertEquals("chunks", l.get("itl_tokens_from").asText(), l.toString());
            for (String f : List.of("requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "output_tokens_per_s", "latency_p50_ms",
                    "latency_p99_ms", "seconds")) {
                assertTrue(l.get(f).isNumber(), f + " in " + l);
            }
            assertTrue(l.get("first_error").isNull(), l.toString());
        }
        JsonNode sent = bodies.get(0);
        assertEquals("fake-llm", sent.get("model").asText());
        assertEquals("user", sent.at("/messages/0/role").asText());
        assertEquals("Say hi.", sent.at("/messages/0/content").asText());
        assertTrue(sent.get("stream").asBoolean());
        assertEquals(64, sent.get("max_tokens").asInt());
        assertEquals(0, sent.get("temperature").asInt());
        assertTrue(sent.at("/stream_options/include_usage").asBoolean());
    }

    @Test
    void chat_usageOnEveryChunk_itlTokensFromUsageDeltas() throws Exception {
        Exit e = bench(quick("/deltas", "--format", "json"));
        assertEquals(0, e.status(), e.err() + e.out());
        for (JsonNode l : json(e).get("levels")) {
            long requests = l.get("requests").asLong();
            assertEquals(2 * K * requests, l.get("output_tokens").asLong(), l.toString());
            assertEquals(K * requests, l.get("content_chunks").asLong(), l.toString());
            assertEquals("usage", l.get("itl_tokens_from").asText(), l.toString());
            assertEquals("usage", l.get("output_tokens_from").asText(), l.toString());
        }
    }

    @Test
    void chat_noUsage_crlfMultiLineEvents_tokensAreContentChunks_tableSaysSo() throws Exception {
        Exit e = bench(quick("/nousage", "--format", "json"));
        assertEquals(0, e.status(), e.err() + e.out());
        for (JsonNode l : json(e).get("levels")) {
            assertEquals(K * l.get("requests").asLong(), l.get("output_tokens").asLong(), l.toString());
            assertEquals("chunks", l.get("output_tokens_from").asText(), l.toString());
            assertEquals("chunks", l.get("itl_tokens_from").asText(), l.toString());
        }
        Exit table = bench(quick("/nousage"));
        assertEquals(0, table.status(), table.err());
        for (String s : List.of("TTFT p50 ms", "ITL p99 ms", "output tok/s", "tokens/req", "1 per content chunk (no per-chunk usage)",
                "output tokens: content chunks (no usage)")) {
            assertTrue(table.out().contains(s), s + " missing from:\n" + table.out());
        }
    }

    @Test
    void completions_promptField_textChunks_csvColumns() throws Exception {
        bodies.clear();
        Exit e = bench(quick("/usage", "--openai-endpoint", "completions", "--format", "csv", "--extra-body",
                "{\"ignore_eos\": true, \"stream_options\": {\"continuous_usage_stats\": true}}"));
        assertEquals(0, e.status(), e.err() + e.out());
        List<String> lines = e.out().lines().toList();
        assertEquals(3, lines.size(), e.out());
        List<String> header = List.of(lines.get(0).split(","));
        assertEquals(List.of("target", "model", "max_tokens", "concurrency", "requests", "errors", "seconds", "requests_per_s", "ttft_p50_ms",
                "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "itl_tokens_from", "output_tokens_per_s", "output_tokens", "mean_output_tokens",
                "output_tokens_from", "content_chunks", "latency_p50_ms", "latency_p99_ms", "first_error"), header);
        for (String line : lines.subList(1, 3)) {
            List<String> cells = List.of(line.split(",", -1));
            assertEquals(header.size(), cells.size(), line);
            assertEquals("openai " + base + "/usage/v1/completions", cells.get(0));
            assertEquals("0", cells.get(header.indexOf("errors")), line);
            assertEquals(String.format(java.util.Locale.ROOT, "%.3f", (double) K), cells.get(header.indexOf("mean_output_tokens")), line);
            assertFalse(cells.get(header.indexOf("ttft_p50_ms")).isEmpty(), line);
        }
        JsonNode sent = bodies.get(0);
        assertEquals(OpenAiOptions.DEFAULT_PROMPT, sent.get("prompt").asText());
        assertFalse(sent.has("messages"));
        assertTrue(sent.get("ignore_eos").asBoolean(), "--extra-body merged: " + sent);
        assertTrue(sent.at("/stream_options/include_usage").asBoolean() && sent.at("/stream_options/continuous_usage_stats").asBoolean(),
                "objects merge field by field: " + sent);
    }

    @Test
    void apiKey_wrongKeyIsAnErrorWithTheServersMessage_rightKeySentAsBearer() throws Exception {
        Exit refused = bench(quick("/key", "--openai-api-key", "wrong"));
        assertEquals(1, refused.status(), refused.out());
        assertTrue(refused.err().contains("requests failed at concurrency 1") && refused.err().contains("HTTP 401")
                && refused.err().contains("Incorrect API key provided (type invalid_request_error, code invalid_api_key)"), refused.err());
        Exit allowed = bench(quick("/key", "--format", "json", "--max-error-rate", "1"));
        assertEquals(0, allowed.status(), allowed.err());
        for (JsonNode l : json(allowed).get("levels")) {
            assertEquals(0, l.get("requests").asLong(), l.toString());
            assertTrue(l.get("first_error").asText().startsWith("HTTP 401 from " + base + "/key/v1/chat/completions: Incorrect API key"), l.toString());
            assertTrue(l.get("ttft_p50_ms").isNull() && l.get("itl_tokens_from").isNull(), "nothing measured is null: " + l);
        }
        Exit ok = bench(quick("/key", "--format", "json", "--openai-api-key", "secret"));
        assertEquals(0, ok.status(), ok.err());
    }

    @Test
    void errorsInTheStream_countedWithTheirMessages() throws Exception {
        for (String[] c : List.of(new String[] {"/crash", "model crashed (type server_error)"},
                new String[] {"/nodone", "the stream ended without 'data: [DONE]' after " + (K + 1) + " event(s)"},
                new String[] {"/json", "is not an event stream (Content-Type application/json): the server did not stream"})) {
            Exit e = bench(quick(c[0], "--format", "json", "--max-error-rate", "1"));
            assertEquals(0, e.status(), e.err());
            for (JsonNode l : json(e).get("levels")) {
                assertEquals(0, l.get("requests").asLong(), l.toString());
                assertTrue(l.get("errors").asLong() >= 6, l.toString());
                assertTrue(l.get("first_error").asText().contains(c[1]), c[1] + " in " + l);
            }
        }
    }

    @Test
    void streamReadAsItArrives_ttftFromTheFirstContentChunk_afterTheRoleChunk() throws Exception {
        gate1 = new CountDownLatch(1);
        gate2 = new CountDownLatch(1);
        CountDownLatch roleRead = new CountDownLatch(1);
        CountDownLatch contentRead = new CountDownLatch(1);
        OpenAiOptions o = BenchCli.parse("--openai-url", base + "/gated/v1/", "--model", "m").openai();
        try (OpenAiDriver d = new OpenAiDriver(java.util.Objects.requireNonNull(o))) {
            CompletableFuture<SseStream.Generation> f = d.call((content, nanos) -> (content ? contentRead : roleRead).countDown());
            assertTrue(roleRead.await(DEADLINE.toSeconds(), TimeUnit.SECONDS), "the role chunk to be read while the server holds the content");
            assertEquals(1, contentRead.getCount(), "no content yet");
            gate1.countDown();
            assertTrue(contentRead.await(DEADLINE.toSeconds(), TimeUnit.SECONDS),
                    "the first content chunk to be read while the server holds the rest: the body is read as it arrives, not at its end");
            assertFalse(f.isDone());
            gate2.countDown();
            SseStream.Generation g = f.get(DEADLINE.toSeconds(), TimeUnit.SECONDS);
            assertEquals(K, g.contentChunks());
            assertEquals(K, g.outputTokens());
            assertTrue(g.firstEventNanos() < g.contentNanos()[0], "the role chunk came first, and TTFT does not end there");
            assertEquals(g.contentNanos()[0] - g.sentNanos(), g.ttftNanos());
        }
    }

    @Test
    void unreachableServer_exit1_saysWhatToCheck() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        Exit e = bench("--openai-url", "http://127.0.0.1:" + port, "--model", "m", "--request-count", "1");
        assertEquals(1, e.status(), e.out());
        assertTrue(e.err().contains("cannot reach http://127.0.0.1:" + port) && e.err().contains("--openai-url"), e.err());
    }

    @Test
    void options_generationOnlyAndTargetOnlyOptionsRefused_exit2() {
        for (String[] c : List.of(new String[] {"--url", "http://127.0.0.1:1", "--model", "m", "--prompt", "x"},
                new String[] {"--openai-url", "http://127.0.0.1:1", "--url", "http://127.0.0.1:2", "--model", "m"},
                new String[] {"--openai-url", "http://127.0.0.1:1", "--model", "m", "--input-shape", "3"},
                new String[] {"--openai-url", "http://127.0.0.1:1", "--model", "m", "--extra-body", "[1]"},
                new String[] {"--openai-url", "http://127.0.0.1:1", "--model", "m", "--max-tokens", "0"},
                new String[] {"--openai-url", "localhost:9000", "--model", "m"})) {
            Exit e = bench(c);
            assertEquals(2, e.status(), String.join(" ", c) + ": " + e.err());
        }
        assertTrue(bench("--url", "http://127.0.0.1:1", "--model", "m", "--prompt", "x").err().contains("--prompt applies to the generation mode"));
        assertTrue(bench("--openai-url", "localhost:9000", "--model", "m").err().contains("is not an http(s) URL"));
        Exit help = bench("--help");
        for (String s : List.of("--openai-url", "--openai-api-key", "--openai-endpoint", "--max-tokens", "--prompt", "--extra-body", "TTFT")) {
            assertTrue(help.out().contains(s), s + " missing from --help");
        }
    }
}
