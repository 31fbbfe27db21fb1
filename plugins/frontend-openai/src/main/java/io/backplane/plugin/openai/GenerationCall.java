package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.ResponseObserver;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;

/**
 * One completion or chat completion in flight: the host's responses as OpenAI's answer. Streamed,
 * each response's text is one chunk ({@code data: {...}}), then a chunk with the finish reason,
 * the usage chunk when the client asked for it ({@code stream_options.include_usage}), and
 * {@code data: [DONE]}; otherwise the texts are joined into one answer. Owns:
 * <ul>
 *   <li>one answer (L1): an error before the first chunk is an error reply with its status; after
 *       it, an error chunk ({@code data: {"error": {...}}}, which OpenAI's clients raise) ends the
 *       stream, never a second reply. A model's error response ends the call the same way, and
 *       what the model sends after it is dropped.
 *   <li>usage as Triton's frontend counts it: prompt tokens from the first {@code num_input_tokens},
 *       completion tokens the sum of {@code num_output_tokens}; where the model does not count, the
 *       model's tokenizer counts the prompt and the text, when the frontend has one.
 *   <li>flow control (DESIGN P9): {@link #ready()} is the connection's writability.
 * </ul>
 * The host serialises the observer's calls; the monitor guards only against {@link #abort}.
 */
final class GenerationCall implements ResponseObserver {
    enum Kind { COMPLETION, CHAT }

    private final Exchange exchange;
    private final Kind kind;
    private final String model;
    private final String id;
    private final long created;
    private final boolean stream;
    private final boolean includeUsage;
    private final int maxTokens;
    private final String prompt;
    private final @Nullable TokenCounter counter;
    private final java.util.concurrent.Executor work;
    private final StringBuilder text = new StringBuilder();
    private long promptTokens = -1;
    private long completionTokens = -1;
    private boolean started;
    private boolean ended;
    /** The head and tail of this call's content chunks, made at the first one. */
    private byte @Nullable [][] template;
    private static final JsonStringEncoder ESCAPE = JsonStringEncoder.getInstance();

    GenerationCall(Exchange exchange, Kind kind, String model, boolean stream, boolean includeUsage, int maxTokens, String prompt,
            @Nullable TokenCounter counter, java.util.concurrent.Executor work) {
        this.exchange = requireNonNull(exchange, "exchange is null");
        this.kind = requireNonNull(kind, "kind is null");
        this.model = requireNonNull(model, "model is null");
        this.id = (kind == Kind.CHAT ? "chatcmpl-" : "cmpl-") + java.util.UUID.randomUUID();
        this.created = System.currentTimeMillis() / 1000;
        this.stream = stream;
        this.includeUsage = includeUsage;
        this.maxTokens = maxTokens;
        this.prompt = requireNonNull(prompt, "prompt is null");
        this.counter = counter;
        this.work = requireNonNull(work, "work is null");
    }

    String id() {
        return id;
    }

    @Override
    public synchronized void onResponse(InferenceResponse response) {
        if (ended) {
            return;
        }
        BackplaneException error = response.error();
        if (error != null) {
            fail(error);
            return;
        }
        long in = LlmConvention.count(response, LlmConvention.NUM_INPUT_TOKENS);
        if (in >= 0 && promptTokens < 0) {
            promptTokens = in;
        }
        long out = LlmConvention.count(response, LlmConvention.NUM_OUTPUT_TOKENS);
        if (out >= 0) {
            completionTokens = Math.max(0, completionTokens) + out;
        }
        String delta = LlmConvention.text(response);
        text.append(delta);
        if (stream) {
            start();
            if (!delta.isEmpty()) {
                exchange.event(contentChunk(delta));
            }
        }
    }

    /**
     * The end: the last chunks, or the whole answer. Where the usage needs the tokenizer (the model
     * did not count), the end is written from a worker thread, never from the host's thread that
     * delivers responses (a stub's reader: P9).
     */
    @Override
    public synchronized void onComplete() {
        if (ended) {
            return;
        }
        boolean tokenize = counter != null && (promptTokens < 0 || completionTokens < 0) && (!stream || includeUsage);
        if (!tokenize) {
            finish();
            return;
        }
        try {
            work.execute(this::finish);
        } catch (RuntimeException closing) {
            finish(); // the frontend is closing: its workers take nothing more
        }
    }

    private synchronized void finish() {
        if (ended) {
            return;
        }
        ObjectNode usage = !stream || includeUsage ? usage() : null;
        long counted = usage != null ? usage.get("completion_tokens").asLong() : completionTokens;
        ended = true;
        String finish = counted >= maxTokens ? "length" : "stop";
        if (stream) {
            start();
            ObjectNode last = chunk(null, finish);
            if (includeUsage) {
                last.putNull("usage");
            }
            exchange.event(last);
            if (includeUsage) {
                ObjectNode u = envelope();
                u.putArray("choices");
                if (usage == null) {
                    u.putNull("usage");
                } else {
                    u.set("usage", usage);
                }
                exchange.event(u);
            }
            exchange.endStream(true);
            return;
        }
        ObjectNode root = envelope();
        ObjectNode choice = root.putArray("choices").addObject();
        choice.put("index", 0);
        if (kind == Kind.CHAT) {
            ObjectNode message = choice.putObject("message");
            message.put("role", "assistant");
            message.put("content", text.toString());
        } else {
            choice.put("text", text.toString());
        }
        choice.putNull("logprobs");
        choice.put("finish_reason", finish);
        if (usage == null) {
            root.putNull("usage");
        } else {
            root.set("usage", usage);
        }
        exchange.reply(root);
    }

    @Override
    public synchronized void onError(BackplaneException error) {
        if (!ended) {
            fail(error);
        }
    }

    /** Ends the call with {@code error} (the frontend is closing); false when it had ended. */
    synchronized boolean abort(BackplaneException error) {
        if (ended) {
            return false;
        }
        fail(error);
        return true;
    }

    @Override
    public CompletionStage<Void> ready() {
        return exchange.writable();
    }

    private void fail(BackplaneException error) {
        ended = true;
        ApiError e = ApiError.of(error);
        if (started) {
            exchange.event(e.body());
            exchange.endStream(false);
        } else {
            exchange.fail(e);
        }
    }

    /** The stream's head and, for a chat, OpenAI's first chunk: the assistant's role with empty content. */
    private void start() {
        if (started) {
            return;
        }
        started = true;
        exchange.startStream();
        if (kind == Kind.CHAT) {
            ObjectNode first = envelope();
            ObjectNode choice = first.putArray("choices").addObject();
            choice.put("index", 0);
            ObjectNode delta = choice.putObject("delta");
            delta.put("role", "assistant");
            delta.put("content", "");
            choice.putNull("logprobs");
            choice.putNull("finish_reason");
            if (includeUsage) {
                first.putNull("usage");
            }
            exchange.event(first);
        }
    }

    /**
     * A content chunk's bytes, {@code data: {...}\n\n}: what {@link #chunk} writes for a delta, from a head and a tail
     * made once per call around the escaped text (the hot path: one per token).
     */
    private byte[] contentChunk(String delta) {
        byte[][] t = template;
        if (t == null) {
            String marker = "\u0000";
            String json = chunk(marker, null).toString();
            int at = json.indexOf("\"\\u0000\"");
            t = new byte[][] {("data: " + json.substring(0, at)).getBytes(StandardCharsets.UTF_8),
                    (json.substring(at + 8) + "\n\n").getBytes(StandardCharsets.UTF_8)};
            template = t;
        }
        byte[] text = ESCAPE.quoteAsUTF8(delta);
        byte[] out = new byte[t[0].length + text.length + 2 + t[1].length];
        System.arraycopy(t[0], 0, out, 0, t[0].length);
        out[t[0].length] = '"';
        System.arraycopy(text, 0, out, t[0].length + 1, text.length);
        out[t[0].length + 1 + text.length] = '"';
        System.arraycopy(t[1], 0, out, t[0].length + 2 + text.length, t[1].length);
        return out;
    }

    private ObjectNode chunk(@Nullable String delta, @Nullable String finish) {
        ObjectNode root = envelope();
        ArrayNode choices = root.putArray("choices");
        ObjectNode choice = choices.addObject();
        choice.put("index", 0);
        if (kind == Kind.CHAT) {
            ObjectNode d = choice.putObject("delta");
            if (delta != null) {
                d.put("content", delta);
            }
        } else {
            choice.put("text", delta == null ? "" : delta);
        }
        choice.putNull("logprobs");
        if (finish == null) {
            choice.putNull("finish_reason");
        } else {
            choice.put("finish_reason", finish);
        }
        if (includeUsage && delta != null) {
            root.putNull("usage");
        }
        return root;
    }

    private ObjectNode envelope() {
        ObjectNode root = Json.MAPPER.createObjectNode();
        root.put("id", id);
        root.put("object", kind == Kind.CHAT ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion");
        root.put("created", created);
        root.put("model", model);
        root.putNull("system_fingerprint");
        return root;
    }

    /** Usage as the model counted it, else as the tokenizer counts; null when neither can. */
    private @Nullable ObjectNode usage() {
        long p = promptTokens;
        long c = completionTokens;
        TokenCounter tc = counter;
        if (tc != null && (p < 0 || c < 0)) {
            try {
                if (p < 0) {
                    // as vLLM counts: a rendered chat already holds its special tokens; a completion's prompt gets the tokenizer's
                    p = kind == Kind.CHAT ? tc.count(prompt) : tc.count(prompt, true);
                }
                if (c < 0) {
                    c = tc.count(text.toString());
                }
            } catch (RuntimeException e) {
                // a tokenizer closed by a reload, or failing: the answer goes out without usage rather than not at all
                return null;
            }
        }
        if (p < 0 || c < 0) {
            return null;
        }
        ObjectNode u = Json.MAPPER.createObjectNode();
        u.put("prompt_tokens", p);
        u.put("completion_tokens", c);
        u.put("total_tokens", p + c);
        return u;
    }
}
