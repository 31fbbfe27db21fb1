package io.backplane.bench;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * One streamed OpenAI answer, read line by line as it arrives: server-sent events (lines of
 * {@code field: value}, {@code data:} lines joined by newlines, an event dispatched at a blank
 * line, {@code :} comments ignored), each event's data a JSON chunk, {@code data: [DONE]} the end.
 *
 * <p>A <em>content chunk</em> is one with non-empty text in some choice: {@code delta.content}
 * (chat) or {@code text} (completions). The role-only chunk OpenAI sends first
 * ({@code {"delta":{"role":"assistant"}}}) and the final usage chunk (empty {@code choices}) are
 * not. Tokens per content chunk come from usage deltas when every content chunk carries a
 * cumulative {@code usage.completion_tokens} (vLLM's {@code continuous_usage_stats}), else count
 * as 1 each; the output tokens are the last {@code usage.completion_tokens} seen, else the
 * content chunks.
 *
 * <p>An error object ({@code {"error": {...}}}, or an event of type {@code error}), a chunk that
 * is not JSON, or a stream that ends without {@code [DONE]} fails the request, with the message.
 * Events after {@code [DONE]} are ignored; an event left open at the end of the stream (no blank
 * line after it) is still read.
 *
 * <p>Not thread-safe: one reader feeds it lines in order (the HTTP client's line subscriber,
 * whose calls are serialised), then calls {@link #end}.
 */
final class SseStream {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MAX_ERROR_CHARS = 500;

    /** Told of each event as it is read; for tests that hand the server its next step. */
    interface Listener {
        Listener NONE = (content, nanos) -> { };

        /** An event was read at {@code nanos}; {@code content}: whether it was a content chunk. */
        void event(boolean content, long nanos);
    }

    private final boolean chat;
    private final long sentNanos;
    private final Listener listener;
    private final StringBuilder data = new StringBuilder();
    private boolean hasData;
    private String eventType = "";
    private long[] contentNanos = new long[16];
    private int[] usageDeltas = new int[16];
    private int contentChunks;
    private boolean everyContentChunkHadUsage = true;
    private long cumulativeTokens;
    private long lastUsageTokens = -1;
    private int events;
    private long firstEventNanos = -1;
    private boolean done;
    private @Nullable String error;

    /**
     * @param chat chat completions ({@code delta.content}) rather than completions ({@code text})
     * @param sentNanos when the request was sent ({@link System#nanoTime()})
     */
    SseStream(boolean chat, long sentNanos, Listener listener) {
        this.chat = chat;
        this.sentNanos = sentNanos;
        this.listener = listener;
    }

    /** One line of the body, without its line terminator, read at {@code nanos}. */
    void line(String line, long nanos) {
        if (line.isEmpty()) {
            dispatch(nanos);
            return;
        }
        if (line.startsWith(":")) {
            return; // a comment (keep-alive)
        }
        int colon = line.indexOf(':');
        String field = colon < 0 ? line : line.substring(0, colon);
        String value = colon < 0 ? "" : line.substring(colon + 1);
        if (value.startsWith(" ")) {
            value = value.substring(1);
        }
        if (field.equals("data")) {
            if (hasData) {
                data.append('\n');
            }
            data.append(value);
            hasData = true;
        } else if (field.equals("event")) {
            eventType = value;
        }
        // id, retry and unknown fields: nothing to measure
    }

    private void dispatch(long nanos) {
        if (!hasData) {
            eventType = "";
            return; // a blank line with no event open (SSE ignores it)
        }
        String payload = data.toString();
        String type = eventType;
        data.setLength(0);
        hasData = false;
        eventType = "";
        if (done || error != null) {
            return;
        }
        events++;
        if (firstEventNanos < 0) {
            firstEventNanos = nanos;
        }
        if (payload.strip().equals("[DONE]")) {
            done = true;
            listener.event(false, nanos);
            return;
        }
        JsonNode chunk;
        try {
            chunk = JSON.readTree(payload);
        } catch (JsonProcessingException e) {
            error = "event " + events + " is not JSON: " + clip(payload);
            return;
        }
        if (chunk.has("error") || type.equals("error")) {
            error = errorMessage(chunk);
            return;
        }
        boolean content = false;
        for (JsonNode choice : chunk.path("choices")) {
            JsonNode text = chat ? choice.path("delta").path("content") : choice.path("text");
            if (text.isTextual() && !text.asText().isEmpty()) {
                content = true;
            }
        }
        JsonNode usage = chunk.path("usage").path("completion_tokens");
        long usageTokens = usage.canConvertToLong() ? usage.asLong() : -1;
        if (content) {
            if (contentChunks == contentNanos.length) {
                contentNanos = Arrays.copyOf(contentNanos, contentChunks * 2);
                usageDeltas = Arrays.copyOf(usageDeltas, contentChunks * 2);
            }
            contentNanos[contentChunks] = nanos;
            if (usageTokens >= 0) {
                usageDeltas[contentChunks] = (int) Math.max(0, usageTokens - cumulativeTokens);
            } else {
                everyContentChunkHadUsage = false;
            }
            contentChunks++;
        }
        if (usageTokens >= 0) {
            cumulativeTokens = usageTokens;
            lastUsageTokens = usageTokens;
        }
        listener.event(content, nanos);
    }

    /**
     * The end of the body, at {@code nanos}.
     *
     * @return the request's figures
     * @throws IllegalStateException with the server's message when the stream carried an error,
     *     or saying what was wrong with it
     */
    Generation end(long nanos) {
        dispatch(nanos); // an event with no blank line after it
        if (error != null) {
            throw new IllegalStateException(error);
        }
        if (!done) {
            throw new IllegalStateException("the stream ended without 'data: [DONE]' after " + events + " event(s)");
        }
        boolean fromUsage = everyContentChunkHadUsage && contentChunks > 0;
        int[] tokens = new int[contentChunks];
        for (int i = 0; i < contentChunks; i++) {
            tokens[i] = fromUsage ? usageDeltas[i] : 1;
        }
        return new Generation(sentNanos, nanos, firstEventNanos, Arrays.copyOf(contentNanos, contentChunks), tokens, fromUsage,
                lastUsageTokens >= 0 ? lastUsageTokens : contentChunks, lastUsageTokens >= 0);
    }

    /** The message of an OpenAI error object ({@code {"error": {"message", "type", "code"}}}), or the JSON itself. */
    static String errorMessage(JsonNode body) {
        JsonNode e = body.path("error");
        String message = e.isTextual() ? e.asText() : e.path("message").asText("");
        if (message.isEmpty()) {
            return clip(body.toString());
        }
        StringBuilder b = new StringBuilder(clip(message));
        String type = e.path("type").asText("");
        String code = e.path("code").isValueNode() ? e.path("code").asText("") : "";
        if (!type.isEmpty() || !code.isEmpty()) {
            b.append(" (").append(type.isEmpty() ? "" : "type " + type).append(!type.isEmpty() && !code.isEmpty() ? ", " : "")
                    .append(code.isEmpty() ? "" : "code " + code).append(')');
        }
        return b.toString();
    }

    /** An error body as the report shows it: the OpenAI error object's message, or the text itself. */
    static String errorMessage(String body) {
        try {
            JsonNode n = JSON.readTree(body);
            if (n != null && n.isObject()) {
                return errorMessage(n);
            }
        } catch (JsonProcessingException e) {
            // not JSON: the text itself
        }
        return body.isBlank() ? "(empty body)" : clip(body.strip());
    }

    private static String clip(String s) {
        return s.length() <= MAX_ERROR_CHARS ? s : s.substring(0, MAX_ERROR_CHARS) + "…";
    }

    /**
     * One streamed request's figures; times are {@link System#nanoTime()} values.
     *
     * @param sentNanos when the request was sent
     * @param endNanos when its body ended
     * @param firstEventNanos when its first event (often the role-only chunk) arrived
     * @param contentNanos when each content chunk arrived
     * @param tokens tokens of each content chunk: usage deltas, or 1 each
     * @param tokensFromUsage whether {@code tokens} are usage deltas
     * @param outputTokens the final usage's {@code completion_tokens}, else the content chunks
     * @param outputFromUsage whether {@code outputTokens} came from usage
     */
    record Generation(long sentNanos, long endNanos, long firstEventNanos, long[] contentNanos, int[] tokens, boolean tokensFromUsage,
            long outputTokens, boolean outputFromUsage) {

        /** Content chunks received. */
        int contentChunks() {
            return contentNanos.length;
        }

        /** Time to first token: from sending to the first content chunk, or -1 when none came. */
        long ttftNanos() {
            return contentNanos.length == 0 ? -1 : contentNanos[0] - sentNanos;
        }

        /** Receives inter-token latencies: nanoseconds per token, and the tokens at that latency. */
        interface Sink {
            void accept(long nanosPerToken, int tokens);
        }

        /**
         * The inter-token latencies: for each content chunk after the first, the time since the
         * last chunk that brought tokens, divided by its tokens; a chunk that by usage brought no
         * new token is skipped, so the next gap runs from the last chunk that did.
         */
        void interTokenLatencies(Sink sink) {
            if (contentNanos.length == 0) {
                return;
            }
            long previous = contentNanos[0];
            for (int i = 1; i < contentNanos.length; i++) {
                if (tokens[i] <= 0) {
                    continue;
                }
                sink.accept((contentNanos[i] - previous) / tokens[i], tokens[i]);
                previous = contentNanos[i];
            }
        }
    }
}
