package io.backplane.bench;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * What the generation mode measures: streamed completions from an OpenAI-compatible server.
 *
 * @param baseUrl the server, e.g. {@code http://127.0.0.1:9000} (a trailing {@code /v1} is accepted)
 * @param endpoint {@code /v1/chat/completions} or {@code /v1/completions}
 * @param apiKey sent as {@code Authorization: Bearer KEY}, or null for no header
 * @param model the {@code model} field of every request
 * @param prompt the user message (chat) or the prompt (completions), the same for every request
 * @param maxTokens the {@code max_tokens} field, ≥ 1
 * @param extraBody fields merged into every request body (objects merge field by field), or null
 * @param concurrency closed-loop concurrency levels to sweep (concurrent streams), each ≥ 1
 * @param duration measured time per level
 * @param warmup unmeasured time before each level
 * @param requestCount when positive, each level ends once this many requests were measured (or
 *     when {@code duration} passes first); 0 measures for {@code duration}
 */
public record OpenAiOptions(String baseUrl, Endpoint endpoint, @Nullable String apiKey, String model, String prompt, int maxTokens,
        @Nullable ObjectNode extraBody, List<Integer> concurrency, Duration duration, Duration warmup, long requestCount) {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The prompt when none is given: a short instruction that asks for a long answer. */
    public static final String DEFAULT_PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle.";

    /** Which OpenAI API the requests go to. */
    public enum Endpoint {
        /** {@code POST /v1/chat/completions}, the prompt as one user message; content in {@code choices[].delta.content}. */
        chat("/v1/chat/completions"),
        /** {@code POST /v1/completions}, the prompt as {@code prompt}; content in {@code choices[].text}. */
        completions("/v1/completions");

        private final String path;

        Endpoint(String path) {
            this.path = path;
        }

        /** The path below the base URL. */
        public String path() {
            return path;
        }
    }

    public OpenAiOptions {
        requireNonNull(baseUrl, "baseUrl is null");
        requireNonNull(endpoint, "endpoint is null");
        requireNonNull(model, "model is null");
        requireNonNull(prompt, "prompt is null");
        concurrency = List.copyOf(concurrency);
        requireNonNull(duration, "duration is null");
        requireNonNull(warmup, "warmup is null");
        extraBody = extraBody == null ? null : extraBody.deepCopy();
        URI u;
        try {
            u = URI.create(baseUrl);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--openai-url '" + baseUrl + "' is not a URL (e.g. http://127.0.0.1:9000)", e);
        }
        if (!("http".equals(u.getScheme()) || "https".equals(u.getScheme())) || u.getHost() == null) {
            throw new IllegalArgumentException("--openai-url '" + baseUrl + "' is not an http(s) URL with a host (e.g. http://127.0.0.1:9000)");
        }
        if (maxTokens < 1) {
            throw new IllegalArgumentException("--max-tokens must be ≥ 1, got " + maxTokens);
        }
        if (concurrency.isEmpty() || concurrency.stream().anyMatch(c -> c < 1)) {
            throw new IllegalArgumentException("concurrency levels must be ≥ 1, got " + concurrency);
        }
        if (requestCount < 0) {
            throw new IllegalArgumentException("request count must be ≥ 0, got " + requestCount);
        }
        if (duration.isZero() || duration.isNegative()) {
            throw new IllegalArgumentException("duration must be positive, got " + duration);
        }
    }

    /** The endpoint's full URI: the base URL without a trailing {@code /} or {@code /v1}, then the endpoint's path. */
    public URI uri() {
        return URI.create(root() + endpoint.path());
    }

    /** The base URL without a trailing {@code /} or {@code /v1}. */
    String root() {
        String b = baseUrl;
        while (b.endsWith("/")) {
            b = b.substring(0, b.length() - 1);
        }
        return b.endsWith("/v1") ? b.substring(0, b.length() - 3) : b;
    }

    /** The body every request sends: model, prompt, {@code stream}, {@code max_tokens}, {@code temperature 0}, usage asked for, then the extra fields. */
    public String body() {
        ObjectNode b = JSON.createObjectNode();
        b.put("model", model);
        if (endpoint == Endpoint.chat) {
            b.putArray("messages").addObject().put("role", "user").put("content", prompt);
        } else {
            b.put("prompt", prompt);
        }
        b.put("stream", true);
        b.put("max_tokens", maxTokens);
        b.put("temperature", 0);
        b.putObject("stream_options").put("include_usage", true);
        if (extraBody != null) {
            merge(b, extraBody);
        }
        return b.toString();
    }

    private static void merge(ObjectNode into, ObjectNode from) {
        for (var e : from.properties()) {
            JsonNode old = into.get(e.getKey());
            if (old instanceof ObjectNode o && e.getValue() instanceof ObjectNode n) {
                merge(o, n);
            } else {
                into.set(e.getKey(), e.getValue().deepCopy());
            }
        }
    }

    /**
     * Parses {@code --extra-body}: a JSON object.
     *
     * @throws IllegalArgumentException naming the text when it is not a JSON object
     */
    static ObjectNode parseExtraBody(String json) {
        JsonNode n;
        try {
            n = JSON.readTree(json);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalArgumentException("--extra-body '" + json + "' is not JSON (" + e.getOriginalMessage() + "); give an object, e.g. '{\"ignore_eos\": true}'", e);
        }
        if (!(n instanceof ObjectNode o)) {
            throw new IllegalArgumentException("--extra-body '" + json + "' is not a JSON object; give one, e.g. '{\"ignore_eos\": true}'");
        }
        return o;
    }

    /** A short description of the target, for reports. */
    public String targetName() {
        return "openai " + uri();
    }
}
