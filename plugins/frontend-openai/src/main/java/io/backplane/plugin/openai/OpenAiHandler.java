package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.protocol.RestrictedApis;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import io.backplane.spi.host.RequestHandle;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.util.concurrent.GenericFutureListener;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executor;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection's requests: the API key, the restricted groups, then the route. A request is
 * answered off the event loop (reading a model's tokenizer, rendering a chat template), one at a
 * time per connection: requests a client pipelines wait (at most 16) until the answer before them
 * is written, so answers never overtake or interleave. A connection that closes first cancels its
 * request. A request's memory reservation (O1) is held until its answer is written.
 */
final class OpenAiHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private static final Logger log = LoggerFactory.getLogger(OpenAiHandler.class);

    private final OpenAiFrontend frontend;
    private final InferenceService service;
    private final OpenAiOptions options;
    private final Executor work;

    OpenAiHandler(OpenAiFrontend frontend, Executor work) {
        super(false);
        this.frontend = requireNonNull(frontend, "frontend is null");
        this.service = frontend.service();
        this.options = frontend.options();
        this.work = requireNonNull(work, "work is null");
    }

    /** Whether a request of this connection is being answered (the idle timeout then leaves it open). */
    static boolean busy(io.netty.channel.Channel ch) {
        return Boolean.TRUE.equals(ch.attr(BUSY).get());
    }

    private static final io.netty.util.AttributeKey<Boolean> BUSY = io.netty.util.AttributeKey.valueOf(OpenAiHandler.class, "openaiBusy");
    /** Requests read ahead on a connection while one is answered (HTTP/1.1 pipelining), answered in order. */
    private final java.util.ArrayDeque<FullHttpRequest> waiting = new java.util.ArrayDeque<>();
    private static final int MAX_PIPELINED = 16;

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        if (busy(ctx.channel())) {
            // pipelined: answered after the one under way, never beside it (its answer would land inside the other's stream)
            ctx.channel().config().setAutoRead(false);
            if (waiting.size() >= MAX_PIPELINED) {
                req.release();
                ctx.close();
                return;
            }
            waiting.add(req);
            return;
        }
        dispatch(ctx, req);
    }

    /** Answers {@code req}; runs on the event loop; the next waiting request goes when its answer is written. */
    private void dispatch(ChannelHandlerContext ctx, FullHttpRequest req) {
        ctx.channel().attr(BUSY).set(Boolean.TRUE);
        ctx.channel().config().setAutoRead(false);
        java.util.ArrayDeque<io.backplane.spi.host.MemoryReservation> held = ctx.channel().attr(OpenAiFrontend.RESERVATIONS).get();
        io.backplane.spi.host.MemoryReservation reservation = held == null ? null : held.poll();
        boolean keepAlive = HttpUtil.isKeepAlive(req) && !frontend.closing() && req.decoderResult().isSuccess();
        Exchange ex = new Exchange(ctx.channel(), keepAlive);
        frontend.opened(ex);
        ex.whenEnded(() -> {
            if (reservation != null) {
                reservation.close(); // O1: held until the answer is written
            }
            frontend.ended(ex);
            ctx.channel().eventLoop().execute(() -> {
                ctx.channel().attr(BUSY).set(Boolean.FALSE);
                FullHttpRequest next = waiting.poll();
                if (next != null) {
                    dispatch(ctx, next);
                } else {
                    ctx.channel().config().setAutoRead(true);
                }
            });
        });
        if (req.decoderResult().isFailure()) {
            req.release();
            ex.fail(new ApiError(400, "the request could not be read as HTTP: " + req.decoderResult().cause().getMessage()
                    + " (headers above 64 KiB or a request line above 4 KiB are refused)", "invalid_request_error", null, null));
            return;
        }
        try {
            work.execute(() -> {
                try {
                    serve(req, ex);
                } catch (ApiError.Failure f) {
                    ex.fail(f.error());
                } catch (RuntimeException | Error e) {
                    ApiError err = ApiError.of(e);
                    if (err.status() >= 500 && !(e instanceof BackplaneException)) {
                        log.error("openai frontend: {} {} failed", req.method(), req.uri(), e);
                    }
                    ex.fail(err);
                } finally {
                    req.release();
                }
            });
        } catch (RuntimeException e) {
            // the frontend is closing: its executor takes nothing more
            req.release();
            ex.fail(new ApiError(503, "the server is shutting down", "service_unavailable_error", null, null));
        }
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        for (FullHttpRequest r; (r = waiting.poll()) != null;) {
            r.release();
        }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable()) {
            Exchange.Writable.wake(ctx.channel());
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        Exchange.Writable.wake(ctx.channel());
        for (FullHttpRequest r; (r = waiting.poll()) != null;) {
            r.release();
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        log.debug("openai frontend: connection {} failed: {}", ctx.channel().remoteAddress(), cause.toString());
        ctx.close();
    }

    private void serve(FullHttpRequest req, Exchange ex) {
        if (frontend.closing()) {
            throw new ApiError(503, "the server is shutting down", "service_unavailable_error", null, null).failure();
        }
        String path = new QueryStringDecoder(req.uri()).path();
        RestrictedApis.Api api = switch (path) {
            case "/v1/completions", "/v1/chat/completions", "/v1/embeddings" -> RestrictedApis.Api.INFERENCE;
            case "/health/ready" -> RestrictedApis.Api.HEALTH;
            default -> path.startsWith("/v1/models") ? RestrictedApis.Api.MODEL_REPOSITORY : RestrictedApis.Api.METADATA;
        };
        String refusal = options.restricted().refusal(api, h -> req.headers().get(h));
        if (refusal != null) {
            throw new ApiError(403, refusal, "permission_error", null, null).failure();
        }
        if (path.equals("/health/ready")) {
            require(req, HttpMethod.GET);
            if (!service.isReady()) {
                throw new ApiError(503, "the server is not ready", "service_unavailable_error", null, null).failure();
            }
            ex.reply(Json.MAPPER.createObjectNode().put("ready", true));
            return;
        }
        checkKey(req);
        switch (path) {
            case "/v1/models" -> {
                require(req, HttpMethod.GET);
                ObjectNode root = Json.MAPPER.createObjectNode();
                root.put("object", "list");
                ArrayNode data = root.putArray("data");
                for (String m : readyModels()) {
                    data.add(modelObject(m));
                }
                ex.reply(root);
            }
            case "/v1/completions" -> generate(req, ex, GenerationCall.Kind.COMPLETION);
            case "/v1/chat/completions" -> generate(req, ex, GenerationCall.Kind.CHAT);
            case "/v1/embeddings" -> {
                require(req, HttpMethod.POST);
                new Embeddings(service, frontend.modelFiles(), work).serve(Json.readObject(req.content()), ex);
            }
            default -> {
                if (path.startsWith("/v1/models/")) {
                    require(req, HttpMethod.GET);
                    String m = QueryStringDecoder.decodeComponent(path.substring("/v1/models/".length()), StandardCharsets.UTF_8);
                    if (!readyModels().contains(m)) {
                        throw ApiError.modelNotFound(m).failure();
                    }
                    ex.reply(modelObject(m));
                    return;
                }
                throw new ApiError(404, "no route " + req.method() + " " + path + "; this server serves GET /v1/models, POST /v1/completions, "
                        + "POST /v1/chat/completions and POST /v1/embeddings", "invalid_request_error", null, "not_found").failure();
            }
        }
    }

    private static void require(FullHttpRequest req, HttpMethod method) {
        if (!req.method().equals(method)) {
            throw new ApiError(405, req.method() + " is not allowed on " + new QueryStringDecoder(req.uri()).path() + "; use " + method,
                    "invalid_request_error", null, null).failure();
        }
    }

    private void checkKey(FullHttpRequest req) {
        String key = options.apiKey();
        if (key == null) {
            return;
        }
        String auth = req.headers().get("authorization");
        String given = auth != null && auth.regionMatches(true, 0, "Bearer ", 0, 7) ? auth.substring(7).trim() : null;
        if (given == null || !MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8), key.getBytes(StandardCharsets.UTF_8))) {
            throw new ApiError(401, given == null ? "no API key was given; send it as the header Authorization: Bearer <key>"
                    : "the API key given is not the one this server takes", "authentication_error", null, "invalid_api_key").failure();
        }
    }

    private Set<String> readyModels() {
        Set<String> out = new LinkedHashSet<>();
        for (ModelStatus s : service.repositoryIndex()) {
            if (s.state() == ModelState.READY) {
                out.add(s.name());
            }
        }
        return out;
    }

    private ObjectNode modelObject(String name) {
        ObjectNode o = Json.MAPPER.createObjectNode();
        o.put("id", name);
        o.put("object", "model");
        o.put("created", frontend.startedSeconds());
        o.put("owned_by", "backplane");
        return o;
    }

    /** A completion or a chat completion. */
    private void generate(FullHttpRequest req, Exchange ex, GenerationCall.Kind kind) {
        require(req, HttpMethod.POST);
        JsonNode body = Json.readObject(req.content());
        String model = text(body, "model", true);
        ModelConfig config = config(model);
        boolean stream = bool(body, "stream");
        JsonNode n = body.get("n");
        if (n != null && !n.isNull() && !(n.isIntegralNumber() && n.asLong() == 1)) {
            throw ApiError.invalid("'n' is " + n + "; this server generates one choice per request (n = 1): send n requests instead", "n").failure();
        }
        JsonNode streamOptions = body.get("stream_options");
        if (streamOptions != null && !streamOptions.isNull() && !stream) {
            throw ApiError.invalid("'stream_options' is only allowed with \"stream\": true", "stream_options").failure();
        }
        boolean includeUsage = streamOptions != null && streamOptions.path("include_usage").asBoolean(false);
        int maxTokens = maxTokens(body, kind);
        ModelFiles.Files files = frontend.modelFiles().of(model, config);
        String prompt;
        boolean echo = false;
        if (kind == GenerationCall.Kind.CHAT) {
            JsonNode messages = body.get("messages");
            if (messages == null || !messages.isArray() || messages.isEmpty()) {
                throw ApiError.invalid("'messages' must be a non-empty list of {\"role\", \"content\"} objects", "messages").failure();
            }
            ChatTemplate template = files.template();
            if (template == null) {
                throw ApiError.invalid("model '" + model + "' has no chat template: put a tokenizer_config.json with \"chat_template\", or a "
                        + "chat_template.jinja, in " + files.where() + " (or name the folder with the model's parameter 'tokenizer'), or use "
                        + "/v1/completions with a prompt", "messages").failure();
            }
            prompt = template.render(ChatMessages.of(messages), true, ChatMessages.tools(body.get("tools")));
        } else {
            prompt = prompt(body);
            echo = bool(body, "echo");
            if (body.hasNonNull("suffix")) {
                throw ApiError.invalid("'suffix' is not supported; leave it out", "suffix").failure();
            }
        }
        if (kind == GenerationCall.Kind.CHAT && body.hasNonNull("logprobs") && body.get("logprobs").asBoolean()
                || kind == GenerationCall.Kind.COMPLETION && body.hasNonNull("logprobs")) {
            throw ApiError.invalid("'logprobs' is not supported by this server; leave it out", "logprobs").failure();
        }
        GenerationCall call = new GenerationCall(ex, kind, model, stream, includeUsage, maxTokens, prompt, files.counter(), work);
        InferenceRequest request = LlmConvention.request(model, config, new LlmConvention.Generation(prompt, stream, echo, maxTokens, body), call.id());
        run(ex, () -> service.stream(request, call), call::abort);
    }

    /**
     * Starts a request: a connection that closes before the answer cancels it; a frontend that
     * closes with it still open ends it through {@code abort} (and cancels it).
     */
    void run(Exchange ex, java.util.function.Supplier<RequestHandle> start, java.util.function.Predicate<BackplaneException> abort) {
        if (frontend.closing()) {
            throw new ApiError(503, "the server is shutting down", "service_unavailable_error", null, null).failure();
        }
        RequestHandle handle = start.get();
        ChannelFuture closed = ex.channel().closeFuture();
        GenericFutureListener<ChannelFuture> onClose = f -> handle.cancel();
        closed.addListener(onClose);
        ex.onAbort(e -> {
            abort.test(e);
            handle.cancel();
        });
        ex.whenEnded(() -> closed.removeListener(onClose));
        if (frontend.closing()) {
            // the close may have passed this exchange over before its abort was set: end it here
            ex.abort(new BackplaneException(ErrorCode.UNAVAILABLE, "the server is shutting down"));
        }
    }

    private ModelConfig config(String model) {
        try {
            return service.modelConfig(model, InferenceRequest.LATEST);
        } catch (BackplaneException e) {
            if (e.code() == ErrorCode.NOT_FOUND) {
                throw ApiError.modelNotFound(model).failure();
            }
            throw e;
        }
    }

    private int maxTokens(JsonNode body, GenerationCall.Kind kind) {
        String field = kind == GenerationCall.Kind.CHAT && body.hasNonNull("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return options.defaultMaxTokens();
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt() || v.asInt() < 1) {
            throw ApiError.invalid("'" + field + "' is " + v + "; give a whole number ≥ 1", field).failure();
        }
        return v.asInt();
    }

    private static String prompt(JsonNode body) {
        JsonNode p = body.get("prompt");
        if (p != null && p.isTextual()) {
            return p.asText();
        }
        if (p != null && p.isArray() && p.size() == 1 && p.get(0).isTextual()) {
            return p.get(0).asText();
        }
        if (p != null && p.isArray()) {
            for (JsonNode e : p) {
                if (!e.isTextual()) {
                    throw ApiError.invalid("'prompt' must be a string; token ids are not supported: send text", "prompt").failure();
                }
            }
        }
        if (p != null && p.isArray() && p.size() > 1) {
            throw ApiError.invalid("'prompt' is a list of " + p.size() + " prompts; this server takes one prompt per request: send one request each",
                    "prompt").failure();
        }
        throw ApiError.invalid("'prompt' must be a string" + (p == null ? "; the request has none" : ", not " + p.getNodeType().name().toLowerCase(java.util.Locale.ROOT)
                + (p.isArray() ? " (token ids are not supported: send text)" : "")), "prompt").failure();
    }

    static String text(JsonNode body, String field, boolean required) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            if (required) {
                throw ApiError.invalid("'" + field + "' is required", field).failure();
            }
            return "";
        }
        if (!v.isTextual() || v.asText().isEmpty()) {
            throw ApiError.invalid("'" + field + "' must be a non-empty string, not " + v, field).failure();
        }
        return v.asText();
    }

    private static boolean bool(JsonNode body, String field) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return false;
        }
        if (!v.isBoolean()) {
            throw ApiError.invalid("'" + field + "' must be true or false, not " + v, field).failure();
        }
        return v.asBoolean();
    }

    /** Chat messages and tools as the template reads them. */
    static final class ChatMessages {
        private ChatMessages() {
        }

        static List<Map<String, Object>> of(JsonNode messages) {
            List<Map<String, Object>> out = new ArrayList<>();
            int i = 0;
            for (JsonNode m : messages) {
                if (!m.isObject() || !m.path("role").isTextual()) {
                    throw ApiError.invalid("messages[" + i + "] must be an object with a string \"role\"", "messages").failure();
                }
                @SuppressWarnings("unchecked")
                Map<String, Object> map = Json.MAPPER.convertValue(m, Map.class);
                JsonNode content = m.get("content");
                if (content != null && content.isArray()) {
                    StringBuilder sb = new StringBuilder();
                    for (JsonNode part : content) {
                        if (!"text".equals(part.path("type").asText()) || !part.path("text").isTextual()) {
                            throw ApiError.invalid("messages[" + i + "].content has a part of type '" + part.path("type").asText()
                                    + "'; this server takes text parts only ({\"type\": \"text\", \"text\": ...})", "messages").failure();
                        }
                        sb.append(part.get("text").asText());
                    }
                    map.put("content", sb.toString());
                } else if (content != null && !content.isNull() && !content.isTextual()) {
                    throw ApiError.invalid("messages[" + i + "].content must be a string or a list of text parts", "messages").failure();
                }
                out.add(map);
                i++;
            }
            return out;
        }

        static @Nullable List<Map<String, Object>> tools(@Nullable JsonNode tools) {
            if (tools == null || tools.isNull()) {
                return null;
            }
            if (!tools.isArray()) {
                throw ApiError.invalid("'tools' must be a list", "tools").failure();
            }
            List<Map<String, Object>> out = new ArrayList<>();
            for (JsonNode t : tools) {
                @SuppressWarnings("unchecked")
                Map<String, Object> map = Json.MAPPER.convertValue(t, Map.class);
                out.add(map);
            }
            return out;
        }
    }
}
