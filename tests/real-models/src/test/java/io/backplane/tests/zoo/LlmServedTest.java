package io.backplane.tests.zoo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * {@code samples/llm} served by a real host over REST (Triton's generate extension): the sample's model folder as it
 * is, its {@code hf/} made at test time by {@code benchmarks/zoo/make_llm.py} (the zoo's tiny random-weight Llama and
 * its own tokenizer), the stubs run by the model environment's python. Greedy answers equal transformers'
 * {@code model.generate(do_sample=False)} on each prompt alone ({@code src/test/python/llm_reference.py}), token for
 * token: streamed (the deltas joined, {@code num_output_tokens} summed), whole, and from several streams at once, which
 * the model serves together through transformers' continuous batching; sampled streams beside greedy ones (a second,
 * sampling manager) leave the greedy answers as they were. A stream whose client closes the connection is
 * cancelled in the model: the model logs how many tokens it had made, far fewer than asked for, and serves the next
 * request. A chat through the OpenAI frontend, driven by OpenAI's own Python client, equals {@code generate} on the chat
 * as transformers' {@code apply_chat_template} renders it. Skips, naming tools/model-env.sh, without the model environment.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class LlmServedTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MAX_TOKENS = 16;
    private static final List<String> PROMPTS = List.of("The quick brown fox", "Return the path", "Grüße aus München",
            "def main():", "Hello, world", "A list of numbers: 1, 2,");
    private static final String CHAT = "[{\"role\": \"system\", \"content\": \"You answer in one line.\"}, "
            + "{\"role\": \"user\", \"content\": \"Where does the river go?\"}]";
    /** OpenAI's Python client, a greedy streamed chat: prints the content joined and the usage as one JSON line. */
    private static final String OPENAI_CHAT = """
            import json, sys
            from openai import OpenAI
            client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0, timeout=120)
            content, usage = "", None
            for chunk in client.chat.completions.create(model="llm", messages=json.loads(sys.argv[2]), temperature=0,
                                                         max_tokens=int(sys.argv[3]), stream=True,
                                                         stream_options={"include_usage": True}):
                if chunk.choices:
                    content += chunk.choices[0].delta.content or ""
                if chunk.usage:
                    usage = chunk.usage.model_dump()
            print(json.dumps({"content": content, "usage": usage}))
            """;
    private static final Pattern CANCELLED = Pattern.compile("request (\\S+) cancelled by its client after (\\d+) tokens");

    private Path dir;
    private Served served;
    private List<JsonNode> reference;
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();
    private final BlockingQueue<String> modelLog = new LinkedBlockingQueue<>();
    private final AppenderBase<ILoggingEvent> appender = new AppenderBase<>() {
        @Override
        protected void append(ILoggingEvent e) {
            modelLog.add(e.getFormattedMessage());
        }
    };

    @BeforeAll
    void serve(@TempDir Path tmp) throws Exception {
        dir = tmp;
        Path py = Zoo.python();
        Path sample = Zoo.root().resolve("samples/llm/models/llm");
        Path model = Files.createDirectories(dir.resolve("repo/llm/1"));
        Files.copy(sample.resolve("config.pbtxt"), model.getParent().resolve("config.pbtxt"));
        Files.copy(sample.resolve("1/model.py"), model.resolve("model.py"));
        Path hf = model.getParent().resolve("hf");
        Zoo.Run made = Zoo.run(List.of(py.toString(), Zoo.root().resolve("benchmarks/zoo/make_llm.py").toString(), "--out", hf.toString()), 300);
        assertEquals(0, made.exit(), () -> "make_llm.py failed:\n" + made.output());

        // the chat as transformers renders it with the model's own template: the reference for the OpenAI frontend's chat
        Zoo.Run rendered = Zoo.run(List.of(py.toString(), "-c", "import json, sys; from transformers import PreTrainedTokenizerFast; "
                + "print(json.dumps(PreTrainedTokenizerFast.from_pretrained(sys.argv[1]).apply_chat_template(json.loads(sys.argv[2]), tokenize=False, "
                + "add_generation_prompt=True)))", hf.toString(), CHAT), 300);
        assertEquals(0, rendered.exit(), () -> "apply_chat_template failed:\n" + rendered.output());
        List<String> all = new ArrayList<>(PROMPTS);
        all.add(JSON.readTree(rendered.output().lines().reduce((a, b) -> b).orElseThrow()).asText());
        Path prompts = Files.writeString(dir.resolve("prompts.json"), JSON.writeValueAsString(all));
        Zoo.Run ref = Zoo.run(List.of(py.toString(), Zoo.root().resolve("tests/real-models/src/test/python/llm_reference.py").toString(),
                hf.toString(), Integer.toString(MAX_TOKENS), prompts.toString()), 300);
        assertEquals(0, ref.exit(), () -> "llm_reference.py failed:\n" + ref.output());
        reference = new ArrayList<>();
        JSON.readTree(ref.output().lines().reduce((a, b) -> b).orElseThrow()).forEach(reference::add);

        appender.start();
        ((Logger) LoggerFactory.getLogger("io.backplane.backend.python.stub")).addAppender(appender);
        served = Served.start(dir.resolve("repo"), Map.of("python_interpreter", py.toString()));
    }

    @AfterAll
    void close() {
        try {
            if (served != null) {
                served.close();
            }
        } finally {
            ((Logger) LoggerFactory.getLogger("io.backplane.backend.python.stub")).detachAppender(appender);
            appender.stop();
            client.close();
        }
    }

    @Test
    void greedyStream_equalsGenerate_tokenForToken() throws Exception {
        for (int i = 0; i < 2; i++) {
            String prompt = PROMPTS.get(i);
            Streamed s = stream(prompt, greedy(MAX_TOKENS));
            JsonNode want = reference.get(i);
            assertEquals(want.get("text").asText(), s.text, () -> "prompt '" + prompt + "', " + want);
            assertEquals(want.get("tokens").asInt(), s.tokens, () -> "num_output_tokens summed over the stream, " + want);
            assertTrue(s.events > 1, "the answer came as " + s.events + " events, not token by token");
        }
    }

    @Test
    void openAiChat_throughOpenAIsClient_isTheTemplateAsTransformersRendersIt_andEqualsGenerate() throws Exception {
        Zoo.Run r = Zoo.run(List.of(Zoo.python().toString(), "-c", OPENAI_CHAT, served.openai, CHAT, Integer.toString(MAX_TOKENS)), 300);
        assertEquals(0, r.exit(), r::output);
        JsonNode got = JSON.readTree(r.output().lines().reduce((a, b) -> b).orElseThrow());
        JsonNode want = reference.getLast();
        // the model answers the frontend's rendering of the chat; equal to generate() on transformers' rendering only when both render alike
        assertEquals(want.get("text").asText(), got.get("content").asText(), () -> want + " / " + got);
        assertEquals(want.get("tokens").asInt(), got.at("/usage/completion_tokens").asInt(), got::toString);
        assertTrue(got.at("/usage/prompt_tokens").asInt() > 0, got::toString);
    }

    @Test
    void greedyWhole_equalsGenerate_promptPrependedUnlessExcluded() throws Exception {
        String prompt = PROMPTS.get(2);
        JsonNode want = reference.get(2);
        ObjectNode body = JSON.createObjectNode().put("text_input", prompt).put("sampling_parameters", greedy(MAX_TOKENS))
                .put("return_num_input_tokens", true).put("return_num_output_tokens", true);
        JsonNode whole = post("generate", body);
        assertEquals(prompt + want.get("text").asText(), whole.get("text_output").asText(), "vLLM's rule: a whole answer prepends the prompt");
        assertEquals(want.get("tokens").asInt(), whole.get("num_output_tokens").asInt());
        assertTrue(whole.get("num_input_tokens").asInt() > 0, whole::toString);
        JsonNode excluded = post("generate", body.put("exclude_input_in_output", true));
        assertEquals(want.get("text").asText(), excluded.get("text_output").asText());
    }

    @Test
    void concurrentStreams_allEqualGenerate() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(PROMPTS.size());
        try {
            CountDownLatch gate = new CountDownLatch(1);
            List<Future<Streamed>> answers = new ArrayList<>();
            for (String p : PROMPTS) {
                answers.add(pool.submit(() -> {
                    gate.await();
                    return stream(p, greedy(MAX_TOKENS));
                }));
            }
            gate.countDown();
            for (int i = 0; i < PROMPTS.size(); i++) {
                Streamed s = answers.get(i).get(2, TimeUnit.MINUTES);
                JsonNode want = reference.get(i);
                String prompt = PROMPTS.get(i);
                assertEquals(want.get("text").asText(), s.text, () -> "prompt '" + prompt + "', " + want);
                assertEquals(want.get("tokens").asInt(), s.tokens, () -> "prompt '" + prompt + "', " + want);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(1, TimeUnit.MINUTES));
        }
    }

    @Test
    void sampledStreams_runBesideGreedyOnes_whichStillEqualGenerate() throws Exception {
        // greedy requests run on the model's greedy manager, sampled ones on a second, sampling manager
        String sampled = "{\"max_tokens\": " + MAX_TOKENS + ", \"temperature\": 0.8, \"top_p\": 0.9, \"ignore_eos\": true}";
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            CountDownLatch gate = new CountDownLatch(1);
            List<Future<Streamed>> answers = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                String parameters = i % 2 == 0 ? sampled : greedy(MAX_TOKENS);
                answers.add(pool.submit(() -> {
                    gate.await();
                    return stream(PROMPTS.get(0), parameters);
                }));
            }
            gate.countDown();
            for (int i = 0; i < 4; i++) {
                Streamed s = answers.get(i).get(2, TimeUnit.MINUTES);
                if (i % 2 == 0) {
                    assertEquals(MAX_TOKENS, s.tokens, () -> "a sampled stream with ignore_eos: " + s);
                } else {
                    assertEquals(reference.get(0).get("text").asText(), s.text);
                    assertEquals(reference.get(0).get("tokens").asInt(), s.tokens);
                }
            }
            boolean sampling = false; // the model says so once, when the first sampled request arrives
            for (long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(1); !sampling && System.nanoTime() < deadline; ) {
                String line = modelLog.poll(1, TimeUnit.SECONDS);
                sampling = line != null && line.contains("the first sampling request started the sampling manager");
            }
            assertTrue(sampling, "the model never logged that it started its sampling manager");
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(1, TimeUnit.MINUTES));
        }
    }

    @Test
    void closedConnection_cancelsTheRequestInTheModel_thenTheNextRequestIsServed() throws Exception {
        int asked = 900;
        URI u = URI.create(served.http);
        String body = JSON.createObjectNode().put("text_input", "Tell me everything").put("stream", true)
                .put("sampling_parameters", "{\"max_tokens\": " + asked + ", \"ignore_eos\": true}").toString();
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        try (Socket socket = new Socket(u.getHost(), u.getPort())) {
            socket.setSoTimeout(60_000);
            OutputStream out = socket.getOutputStream();
            out.write(("POST /v2/models/llm/generate_stream HTTP/1.1\r\nHost: " + u.getHost() + "\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + bytes.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            int events = 0;
            for (String line; events < 3 && (line = in.readLine()) != null;) {
                if (line.startsWith("data: ")) {
                    assertTrue(line.contains("text_output"), line);
                    events++;
                }
            }
            assertEquals(3, events, "the stream ended before its third event");
        } // the connection closes mid-stream: the frontend cancels the request, the model sees it cancelled
        Matcher m = null;
        while (m == null) {
            String line = modelLog.poll(2, TimeUnit.MINUTES);
            assertTrue(line != null, "the model never logged the cancellation");
            Matcher x = CANCELLED.matcher(line);
            m = x.find() ? x : null;
        }
        int made = Integer.parseInt(m.group(2));
        assertTrue(made >= 3 && made < asked, "the cancelled request made " + made + " of the " + asked + " tokens asked");

        Streamed next = stream(PROMPTS.get(0), greedy(MAX_TOKENS));
        assertEquals(reference.get(0).get("text").asText(), next.text);
    }

    @Test
    void stopString_endsTheAnswerBeforeIt() throws Exception {
        String full = reference.get(3).get("text").asText();
        int cut = full.length() / 2;
        while (cut + 2 < full.length() && full.substring(cut, cut + 2).contains("\ufffd")) {
            cut++; // a stop string of whole characters (a U+FFFD stands for bytes that are not one)
        }
        String stop = full.substring(cut, cut + 2);
        ObjectNode greedyStop = JSON.createObjectNode().put("max_tokens", MAX_TOKENS).put("temperature", 0).put("stop", stop);
        Streamed s = stream(PROMPTS.get(3), greedyStop.toString());
        assertEquals(full.substring(0, full.indexOf(stop)), s.text, () -> "stop " + JSON.valueToTree(stop) + " in " + JSON.valueToTree(full));
    }

    @Test
    void badSamplingParameters_failThatRequestOnly() throws Exception {
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(served.http + "/v2/models/llm/generate"))
                .timeout(Duration.ofMinutes(2)).POST(HttpRequest.BodyPublishers.ofString(JSON.createObjectNode().put("text_input", "x")
                        .put("sampling_parameters", "{\"max_tokens\": 0}").toString())).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(400, r.statusCode(), r::body);
        assertTrue(r.body().contains("max_tokens must be at least 1"), r::body);
        assertEquals(reference.get(1).get("text").asText(), stream(PROMPTS.get(1), greedy(MAX_TOKENS)).text);
    }

    private static String greedy(int maxTokens) {
        return "{\"max_tokens\": " + maxTokens + ", \"temperature\": 0}";
    }

    record Streamed(String text, int tokens, int events) {
    }

    /** POST generate_stream, the SSE events' text_output joined and num_output_tokens summed. */
    private Streamed stream(String prompt, String samplingParameters) throws Exception {
        String body = JSON.createObjectNode().put("text_input", prompt).put("stream", true).put("sampling_parameters", samplingParameters)
                .put("return_num_output_tokens", true).toString();
        HttpResponse<java.util.stream.Stream<String>> r = client.send(HttpRequest.newBuilder(URI.create(served.http + "/v2/models/llm/generate_stream"))
                .timeout(Duration.ofMinutes(2)).header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofLines());
        StringBuilder text = new StringBuilder();
        int tokens = 0;
        int events = 0;
        try (var lines = r.body()) {
            for (String line : (Iterable<String>) lines::iterator) {
                if (!line.startsWith("data: ")) {
                    continue;
                }
                JsonNode e = JSON.readTree(line.substring(6));
                assertTrue(e.get("error") == null, () -> "the stream failed: " + e);
                events++;
                text.append(e.get("text_output").asText());
                tokens += e.get("num_output_tokens").asInt();
            }
        }
        assertEquals(200, r.statusCode());
        return new Streamed(text.toString(), tokens, events);
    }

    private JsonNode post(String action, ObjectNode body) throws Exception {
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(served.http + "/v2/models/llm/" + action))
                .timeout(Duration.ofMinutes(2)).header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body.toString()))
                .build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r::body);
        return JSON.readTree(r.body());
    }
}
