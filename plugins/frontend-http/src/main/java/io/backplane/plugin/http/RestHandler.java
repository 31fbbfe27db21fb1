package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.Extensions;
import io.backplane.protocol.ModelVersions;
import io.backplane.protocol.ProtocolErrors;
import io.backplane.protocol.RestrictedApis;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.protocol.LoadParameters;
import io.backplane.protocol.LogSettingsCodec;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.RequestTracer;
import io.backplane.spi.RequestTrace;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.LoadOverride;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatistics;
import io.backplane.spi.host.ModelStatus;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.util.AsciiString;
import io.netty.util.Attribute;
import io.netty.util.AttributeKey;
import io.netty.util.concurrent.GenericFutureListener;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Routes Open Inference Protocol requests to the {@link InferenceService}. Shared by every
 * connection; all state is per request. Every request gets exactly one reply (a full response,
 * or one event stream), counted in {@code inFlight} until it is written.
 */
@ChannelHandler.Sharable
final class RestHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private static final Logger log = LoggerFactory.getLogger(RestHandler.class);
    static final AsciiString HEADER_LENGTH = AsciiString.cached("Inference-Header-Content-Length");

    private final InferenceService service;
    private final ExecutorService admin;
    private final AtomicInteger inFlight;
    private final SystemSharedMemory shm;
    private final RestrictedApis restricted;
    private final @Nullable LogControl logs;
    private final RequestTracer tracer;
    static final String TRACEPARENT = "traceparent";
    private final Set<Reply> open = ConcurrentHashMap.newKeySet();
    private final Object idle = new Object();
    private volatile boolean draining;

    RestHandler(InferenceService service, ExecutorService admin, AtomicInteger inFlight, SystemSharedMemory shm, RestrictedApis restricted,
            @Nullable LogControl logs, RequestTracer tracer) {
        this.service = service;
        this.logs = logs;
        this.tracer = tracer;
        this.shm = shm;
        this.admin = admin;
        this.inFlight = inFlight;
        this.restricted = restricted;
    }

    private static final CompletionStage<Void> READY = CompletableFuture.completedStage(null);
    /** Per connection: flow-control waiters of an event stream whose channel was not writable (DESIGN P9). */
    private static final AttributeKey<Queue<CompletableFuture<Void>>> WAITING = AttributeKey.valueOf(RestHandler.class, "waitingForWritable");

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
        if (ctx.channel().isWritable()) {
            wakeWaiting(ctx.channel());
        }
        super.channelWritabilityChanged(ctx);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        wakeWaiting(ctx.channel());
        super.channelInactive(ctx);
    }

    /**
     * Completes when {@code ch} can take more writes (its outbound buffer fell under the low water
     * mark) or is closed. The waiter is queued before writability is read again, and the
     * writability event drains the queue after the channel turned writable: no wake-up is lost.
     */
    static CompletionStage<Void> writable(Channel ch) {
        if (ch.isWritable() || !ch.isActive()) {
            return READY;
        }
        Attribute<Queue<CompletableFuture<Void>>> a = ch.attr(WAITING);
        Queue<CompletableFuture<Void>> q = a.get();
        if (q == null) {
            Queue<CompletableFuture<Void>> fresh = new ConcurrentLinkedQueue<>();
            q = a.setIfAbsent(fresh);
            if (q == null) {
                q = fresh;
            }
        }
        CompletableFuture<Void> w = new CompletableFuture<>();
        q.add(w);
        if (ch.isWritable() || !ch.isActive()) {
            wakeWaiting(ch);
        }
        return w;
    }

    private static void wakeWaiting(Channel ch) {
        Queue<CompletableFuture<Void>> q = ch.attr(WAITING).get();
        if (q == null) {
            return;
        }
        CompletableFuture<Void> w;
        while ((w = q.poll()) != null) {
            w.complete(null);
        }
    }

    /** From now on, new requests are answered 503 and their connections closed. */
    void drain() {
        draining = true;
    }

    /** Waits up to {@code millis} for every open request to be answered; whether none is open. */
    boolean awaitIdle(long millis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        synchronized (idle) {
            while (!open.isEmpty()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(idle, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return open.isEmpty();
                }
            }
            return true;
        }
    }

    /** Answers every open request 503 (an event stream under way is ended and its connection closed); how many. */
    int failOpen(String message) {
        int n = 0;
        List<io.netty.channel.ChannelFuture> closing = new java.util.ArrayList<>();
        for (Reply r : List.copyOf(open)) {
            if (r.streaming) {
                if (r.finishStream()) {
                    r.ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT).addListener(ChannelFutureListener.CLOSE);
                    closing.add(r.ctx.channel().closeFuture());
                    n++;
                }
            } else if (r.sendClosing(Responses.error(HttpResponseStatus.SERVICE_UNAVAILABLE, message, false))) {
                closing.add(r.ctx.channel().closeFuture());
                n++;
            }
        }
        // The answers are written on the event loops: wait (bounded) until they are flushed and their
        // connections closed, so that stopping the event loops next cannot drop them unwritten.
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(2);
        for (io.netty.channel.ChannelFuture f : closing) {
            long left = deadline - System.nanoTime();
            if (left <= 0 || !f.awaitUninterruptibly(java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(left) + 1)) {
                break;
            }
        }
        return n;
    }

    private void ended(Reply r) {
        inFlight.decrementAndGet();
        open.remove(r);
        if (draining && open.isEmpty()) {
            synchronized (idle) {
                idle.notifyAll();
            }
        }
    }

    /** One request's single reply. */
    private final class Reply {
        final ChannelHandlerContext ctx;
        final boolean keepAlive;
        private final AtomicBoolean done = new AtomicBoolean();
        volatile boolean streaming;

        Reply(ChannelHandlerContext ctx, boolean keepAlive) {
            this.ctx = ctx;
            this.keepAlive = keepAlive;
            inFlight.incrementAndGet();
            open.add(this);
        }

        void send(FullHttpResponse response) {
            if (!done.compareAndSet(false, true)) {
                response.release();
                log.debug("second reply to one HTTP request dropped");
                return;
            }
            ChannelFuture f = ctx.writeAndFlush(response);
            if (!keepAlive) {
                f.addListener(ChannelFutureListener.CLOSE);
            }
            // open until written: a close that stops the event loops next must not drop it unwritten
            f.addListener(x -> ended(this));
        }

        /** Sends {@code response} and closes the connection, unless a reply was already sent. */
        boolean sendClosing(FullHttpResponse response) {
            if (!done.compareAndSet(false, true)) {
                response.release();
                return false;
            }
            ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE).addListener(x -> ended(this));
            return true;
        }

        void fail(Throwable t) {
            send(errorResponse(t, keepAlive));
        }

        /** Marks the reply done without a full response (an event stream ended). */
        boolean finishStream() {
            if (done.compareAndSet(false, true)) {
                ended(this);
                return true;
            }
            return false;
        }
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        boolean keepAlive = HttpUtil.isKeepAlive(req);
        Reply reply = new Reply(ctx, keepAlive);
        if (!req.decoderResult().isSuccess()) {
            reply.sendClosing(Responses.error(HttpResponseStatus.BAD_REQUEST, "malformed HTTP request: " + req.decoderResult().cause(), false));
            return;
        }
        if (draining) {
            reply.sendClosing(Responses.error(HttpResponseStatus.SERVICE_UNAVAILABLE, "the server is shutting down; send the request to another replica", false));
            return;
        }
        try {
            route(req, reply);
        } catch (Throwable t) {
            reply.fail(t);
        }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        log.debug("http connection {} failed: {}", ctx.channel().remoteAddress(), cause.toString());
        ctx.close();
    }

    private void route(FullHttpRequest req, Reply reply) {
        String uri = req.uri();
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        List<String> seg = new ArrayList<>(8);
        for (String s : path.split("/")) {
            if (!s.isEmpty()) {
                seg.add(QueryStringDecoder.decodeComponent(s));
            }
        }
        HttpMethod m = req.method();
        int n = seg.size();
        if (n == 0 || !seg.get(0).equals("v2")) {
            throw notFound(path);
        }
        if (!restricted.isEmpty()) {
            String refusal = restricted.refusal(RestrictedApis.restApi(seg.subList(1, n)), h -> req.headers().get(h));
            if (refusal != null) {
                reply.send(Responses.error(HttpResponseStatus.FORBIDDEN, refusal, reply.keepAlive));
                return;
            }
        }
        if (n == 1) {
            requireMethod(m, HttpMethod.GET, path);
            reply.send(Responses.json(HttpResponseStatus.OK, serverMetadata(), reply.keepAlive));
            return;
        }
        switch (seg.get(1)) {
            case "health" -> {
                if (n != 3 || !(seg.get(2).equals("live") || seg.get(2).equals("ready"))) {
                    throw notFound(path);
                }
                requireMethod(m, HttpMethod.GET, path);
                boolean ok = seg.get(2).equals("live") ? service.isLive() : service.isReady();
                reply.send(Responses.empty(ok ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE, reply.keepAlive));
            }
            case "repository" -> repository(req, seg, path, reply);
            case "systemsharedmemory" -> systemSharedMemory(req, seg, path, reply);
            case "cudasharedmemory" -> throw new BackplaneException(ErrorCode.UNSUPPORTED,
                    "CUDA shared memory is not supported by this server; use system shared memory (/v2/systemsharedmemory)");
            case "models" -> model(req, seg, path, reply);
            case "logging" -> logging(req, n, m, path, reply);
            case "trace" -> {
                if (n != 3 || !seg.get(2).equals("setting")) {
                    throw notFound(path);
                }
                traceSetting(req, "", path, reply);
            }
            default -> throw notFound(path);
        }
    }

    /**
     * {@code GET|POST /v2/trace/setting} (model "") and {@code /v2/models/<m>/trace/setting}:
     * Triton's trace extension; a POST sets the settings it names (a string or a list of strings;
     * null clears a model's own setting) and answers them all.
     */
    private void traceSetting(FullHttpRequest req, String model, String path, Reply reply) {
        if (!tracer.serves()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host does not trace requests (trace extension)");
        }
        Map<String, List<String>> now;
        if (req.method().equals(HttpMethod.POST)) {
            JsonNode root = InferCodec.readJson(req.content());
            if (!root.isObject()) {
                throw BackplaneException.invalid("the trace settings must be a JSON object, not " + root);
            }
            Map<String, @Nullable List<String>> changes = new java.util.LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : root.properties()) {
                JsonNode v = e.getValue();
                if (v.isNull()) {
                    changes.put(e.getKey(), null);
                } else if (v.isTextual()) {
                    changes.put(e.getKey(), List.of(v.textValue()));
                } else if (v.isArray()) {
                    List<String> values = new ArrayList<>();
                    for (JsonNode x : v) {
                        if (!x.isTextual()) {
                            throw BackplaneException.invalid("trace setting '" + e.getKey() + "' must be a string or a list of strings, not " + v);
                        }
                        values.add(x.textValue());
                    }
                    changes.put(e.getKey(), values);
                } else {
                    throw BackplaneException.invalid("trace setting '" + e.getKey() + "' must be a string or a list of strings, not " + v);
                }
            }
            now = tracer.update(model, changes);
        } else {
            requireMethod(req.method(), HttpMethod.GET, path);
            now = tracer.settings(model);
        }
        Map<String, List<String>> s = now;
        reply.send(Responses.json(HttpResponseStatus.OK, write(g -> {
            g.writeStartObject();
            for (Map.Entry<String, List<String>> e : s.entrySet()) {
                if (e.getValue().size() == 1 && !e.getKey().equals("trace_level")) {
                    g.writeStringField(e.getKey(), e.getValue().get(0));
                } else {
                    g.writeArrayFieldStart(e.getKey());
                    for (String v : e.getValue()) {
                        g.writeString(v);
                    }
                    g.writeEndArray();
                }
            }
            g.writeEndObject();
        }), reply.keepAlive));
    }

    /** {@code GET|POST /v2/logging}: Triton's logging extension; POST applies the settings it names and answers them all. */
    private void logging(FullHttpRequest req, int n, HttpMethod m, String path, Reply reply) {
        LogControl control = logs;
        if (n != 2) {
            throw notFound(path);
        }
        if (control == null) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host offers no run-time logging control (logging extension)");
        }
        LogControl.Settings now;
        if (m.equals(HttpMethod.POST)) {
            JsonNode root = InferCodec.readJson(req.content());
            if (!root.isObject()) {
                throw BackplaneException.invalid("the log settings must be a JSON object, not " + root);
            }
            Map<String, Object> changes = new java.util.LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : root.properties()) {
                JsonNode v = e.getValue();
                changes.put(e.getKey(), v.isTextual() ? v.textValue() : v.isBoolean() ? v.booleanValue() : v.canConvertToLong() && v.isIntegralNumber()
                        ? (Object) v.longValue() : v.toString());
            }
            now = control.update(LogSettingsCodec.merge(control.settings(), changes));
        } else {
            requireMethod(m, HttpMethod.GET, path);
            now = control.settings();
        }
        LogControl.Settings s = now;
        reply.send(Responses.json(HttpResponseStatus.OK, write(g -> {
            g.writeStartObject();
            for (Map.Entry<String, Object> e : LogSettingsCodec.toMap(s).entrySet()) {
                switch (e.getValue()) {
                    case Boolean b -> g.writeBooleanField(e.getKey(), b);
                    case Integer i -> g.writeNumberField(e.getKey(), i);
                    default -> g.writeStringField(e.getKey(), String.valueOf(e.getValue()));
                }
            }
            g.writeEndObject();
        }), reply.keepAlive));
    }

    /** {@code /v2/systemsharedmemory[/region/<r>]/{status,register,unregister}}, as Triton. */
    private void systemSharedMemory(FullHttpRequest req, List<String> seg, String path, Reply reply) {
        int n = seg.size();
        String region;
        if (n == 3) {
            region = null;
        } else if (n == 5 && seg.get(2).equals("region")) {
            region = seg.get(3);
        } else {
            throw notFound(path);
        }
        switch (seg.get(n - 1)) {
            case "status" -> {
                requireMethod(req.method(), HttpMethod.GET, path);
                ByteBuf out = Unpooled.buffer(128);
                try (JsonGenerator g = Json.generator(out)) {
                    g.writeStartArray();
                    for (SystemSharedMemory.RegionStatus r : shm.status(region)) {
                        g.writeStartObject();
                        g.writeStringField("name", r.name());
                        g.writeStringField("key", r.key());
                        g.writeNumberField("offset", r.offset());
                        g.writeNumberField("byte_size", r.byteSize());
                        g.writeEndObject();
                    }
                    g.writeEndArray();
                } catch (IOException e) {
                    out.release();
                    throw new UncheckedIOException(e);
                } catch (RuntimeException e) {
                    out.release();
                    throw e;
                }
                reply.send(Responses.json(HttpResponseStatus.OK, out, reply.keepAlive));
            }
            case "register" -> {
                requireMethod(req.method(), HttpMethod.POST, path);
                if (region == null) {
                    throw notFound(path);
                }
                JsonNode body = InferCodec.readJson(req.content());
                JsonNode key = body.get("key");
                if (key == null || !key.isTextual()) {
                    throw BackplaneException.invalid("register shared-memory region '" + region + "': 'key' (a string) is required");
                }
                shm.register(region, key.asText(), longField(body, "offset", 0), longField(body, "byte_size", -1));
                reply.send(Responses.empty(HttpResponseStatus.OK, reply.keepAlive));
            }
            case "unregister" -> {
                requireMethod(req.method(), HttpMethod.POST, path);
                if (region == null) {
                    shm.unregisterAll();
                } else {
                    shm.unregister(region);
                }
                reply.send(Responses.empty(HttpResponseStatus.OK, reply.keepAlive));
            }
            default -> throw notFound(path);
        }
    }

    private static long longField(JsonNode body, String field, long absent) {
        JsonNode v = body.get(field);
        if (v == null) {
            if (absent < 0) {
                throw BackplaneException.invalid("register shared-memory region: '" + field + "' is required");
            }
            return absent;
        }
        if (!v.canConvertToLong() || !v.isIntegralNumber()) {
            throw BackplaneException.invalid("register shared-memory region: '" + field + "' must be an integer, not " + v);
        }
        return v.asLong();
    }

    private void model(FullHttpRequest req, List<String> seg, String path, Reply reply) {
        int n = seg.size();
        if (n < 3) {
            throw notFound(path);
        }
        if (n == 3 && seg.get(2).equals("stats")) {
            requireMethod(req.method(), HttpMethod.GET, path);
            reply.send(Responses.json(HttpResponseStatus.OK, statistics(service.statistics("", InferenceRequest.LATEST)), reply.keepAlive));
            return;
        }
        String model = seg.get(2);
        long version = InferenceRequest.LATEST;
        int i = 3;
        if (n >= 5 && seg.get(3).equals("versions")) {
            version = ModelVersions.parse(seg.get(4));
            i = 5;
        }
        if (i == 3 && n == 5 && seg.get(3).equals("trace") && seg.get(4).equals("setting")) {
            traceSetting(req, model, path, reply);
            return;
        }
        String action = i == n ? "" : i == n - 1 ? seg.get(i) : null;
        if (action == null) {
            throw notFound(path);
        }
        HttpMethod m = req.method();
        switch (action) {
            case "" -> {
                requireMethod(m, HttpMethod.GET, path);
                reply.send(Responses.json(HttpResponseStatus.OK, modelMetadata(service.metadata(model, version)), reply.keepAlive));
            }
            case "ready" -> {
                requireMethod(m, HttpMethod.GET, path);
                if (service.isModelReady(model, version)) {
                    reply.send(Responses.empty(HttpResponseStatus.OK, reply.keepAlive));
                } else if (service.repositoryIndex().stream().noneMatch(s -> s.name().equals(model))) {
                    throw BackplaneException.notFound("unknown model '" + model + "'");
                } else {
                    throw BackplaneException.unavailable("model '" + model + "'" + (version == InferenceRequest.LATEST ? "" : " version " + version)
                            + " is not ready");
                }
            }
            case "stats" -> {
                requireMethod(m, HttpMethod.GET, path);
                reply.send(Responses.json(HttpResponseStatus.OK, statistics(service.statistics(model, version)), reply.keepAlive));
            }
            case "config" -> {
                requireMethod(m, HttpMethod.GET, path);
                reply.send(Responses.json(HttpResponseStatus.OK, ConfigJson.write(service.modelConfig(model, version)), reply.keepAlive));
            }
            case "infer" -> {
                requireMethod(m, HttpMethod.POST, path);
                infer(req, model, version, reply);
            }
            case "generate", "generate_stream" -> {
                requireMethod(m, HttpMethod.POST, path);
                generate(req, model, version, action.equals("generate_stream"), reply);
            }
            default -> throw notFound(path);
        }
    }

    private void infer(FullHttpRequest req, String model, long version, Reply reply) {
        String h = req.headers().get(HEADER_LENGTH);
        int headerLength = -1;
        if (h != null) {
            try {
                headerLength = Integer.parseInt(h.trim());
            } catch (NumberFormatException e) {
                throw BackplaneException.invalid("Inference-Header-Content-Length '" + h + "' is not an integer");
            }
            if (headerLength < 0) {
                throw BackplaneException.invalid("Inference-Header-Content-Length " + headerLength + " is negative");
            }
        }
        InferCodec.Parsed parsed = InferCodec.parse(model, version, req.content(), headerLength, shm);
        RequestTrace trace = tracer.start(model, req.headers().get(TRACEPARENT));
        CompletableFuture<InferenceResponse> f;
        try {
            f = service.infer(trace == RequestTrace.NONE ? parsed.request() : parsed.request().toBuilder().trace(trace).build());
        } catch (RuntimeException e) {
            parsed.release();
            trace.finish(e);
            throw e;
        }
        GenericFutureListener<ChannelFuture> onClose = cf -> f.cancel(false);
        ChannelFuture closeFuture = reply.ctx.channel().closeFuture();
        if (!f.isDone()) {
            closeFuture.addListener(onClose);
        }
        // One callback: the trace ends before the reply goes out (two callbacks on one future run in no set order).
        f.whenComplete((r, e) -> {
            try {
                trace.finish(e != null ? e : r.error());
            } catch (RuntimeException bad) {
                log.warn("the request trace failed to finish; the reply is still sent", bad);
            }
            closeFuture.removeListener(onClose);
            if (e != null) {
                parsed.release();
                reply.fail(e);
                return;
            }
            try {
                if (r.error() != null) {
                    reply.fail(r.error());
                    return;
                }
                InferCodec.Encoded enc = InferCodec.encode(r, parsed);
                FullHttpResponse resp;
                if (enc.headerLength() >= 0) {
                    resp = Responses.full(HttpResponseStatus.OK, enc.body(), HttpHeaderValues.APPLICATION_OCTET_STREAM, reply.keepAlive);
                    resp.headers().set(HEADER_LENGTH, enc.headerLength());
                } else {
                    resp = Responses.json(HttpResponseStatus.OK, enc.body(), reply.keepAlive);
                }
                reply.send(resp);
            } catch (Throwable t) {
                reply.fail(t);
            } finally {
                parsed.release();
            }
        });
    }

    private void generate(FullHttpRequest req, String model, long version, boolean stream, Reply reply) {
        JsonNode root = InferCodec.readJson(req.content());
        ModelConfig config = service.modelConfig(model, version);
        InferenceRequest request = InferCodec.parseGenerate(model, version, root, config);
        ResponseObserver observer = stream ? new SseObserver(reply) : new CollectingObserver(reply);
        RequestHandle handle = service.stream(request, observer);
        if (!handle.isDone()) {
            ChannelFuture closeFuture = reply.ctx.channel().closeFuture();
            GenericFutureListener<ChannelFuture> onClose = cf -> handle.cancel();
            closeFuture.addListener(onClose);
            if (observer instanceof SseObserver sse) {
                sse.onEnd = () -> closeFuture.removeListener(onClose);
            } else {
                ((CollectingObserver) observer).onEnd = () -> closeFuture.removeListener(onClose);
            }
            if (handle.isDone()) {
                closeFuture.removeListener(onClose);
            }
        }
    }

    /** /generate: exactly one response expected. */
    private final class CollectingObserver implements ResponseObserver {
        private final Reply reply;
        private final List<InferenceResponse> responses = new ArrayList<>(1);
        volatile @Nullable Runnable onEnd;

        CollectingObserver(Reply reply) {
            this.reply = reply;
        }

        @Override
        public void onResponse(InferenceResponse response) {
            responses.add(response);
        }

        @Override
        public void onComplete() {
            end();
            List<InferenceResponse> ok = responses.stream().filter(r -> !r.isError()).toList();
            InferenceResponse firstError = responses.stream().filter(InferenceResponse::isError).findFirst().orElse(null);
            if (firstError != null) {
                reply.fail(java.util.Objects.requireNonNull(firstError.error()));
            } else if (ok.size() != 1) {
                reply.fail(BackplaneException.invalid("the model sent " + ok.size() + " responses; /generate expects exactly one, use /generate_stream"));
            } else {
                try {
                    reply.send(Responses.json(HttpResponseStatus.OK, generateJson(ok.get(0)), reply.keepAlive));
                } catch (Throwable t) {
                    reply.fail(t);
                }
            }
        }

        @Override
        public void onError(BackplaneException error) {
            end();
            reply.fail(error);
        }

        private void end() {
            Runnable r = onEnd;
            if (r != null) {
                r.run();
            }
        }
    }

    /** /generate_stream: each response as one server-sent event {@code data: {...}}. */
    private final class SseObserver implements ResponseObserver {
        private final Reply reply;
        private boolean started;
        volatile @Nullable Runnable onEnd;

        SseObserver(Reply reply) {
            this.reply = reply;
        }

        private void start() {
            if (!started) {
                started = true;
                HttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
                head.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream");
                head.headers().set(HttpHeaderNames.CACHE_CONTROL, HttpHeaderValues.NO_CACHE);
                HttpUtil.setTransferEncodingChunked(head, true);
                if (!reply.keepAlive) {
                    head.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
                }
                reply.streaming = true;
                reply.ctx.write(head);
            }
        }

        /** A slow reader slows the model: the backend waits until Netty's outbound buffer drains. */
        @Override
        public CompletionStage<Void> ready() {
            return writable(reply.ctx.channel());
        }

        private void event(ByteBuf json) {
            ByteBuf ev = Unpooled.buffer(json.readableBytes() + 8);
            ev.writeBytes("data: ".getBytes(StandardCharsets.US_ASCII));
            ev.writeBytes(json);
            json.release();
            ev.writeBytes("\n\n".getBytes(StandardCharsets.US_ASCII));
            reply.ctx.writeAndFlush(new DefaultHttpContent(ev));
        }

        @Override
        public synchronized void onResponse(InferenceResponse response) {
            start();
            BackplaneException e = response.error();
            ByteBuf body;
            try {
                body = e != null ? Responses.errorBody(e.getMessage()) : generateJson(response);
            } catch (RuntimeException x) {
                body = Responses.errorBody(String.valueOf(x.getMessage()));
            }
            event(body);
        }

        @Override
        public synchronized void onComplete() {
            start();
            finish();
        }

        @Override
        public synchronized void onError(BackplaneException error) {
            if (!started) {
                end();
                reply.fail(error);
                return;
            }
            event(Responses.errorBody(error.getMessage()));
            finish();
        }

        private void finish() {
            end();
            ChannelFuture f = reply.ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
            if (!reply.keepAlive) {
                f.addListener(ChannelFutureListener.CLOSE);
            }
            reply.finishStream();
        }

        private void end() {
            Runnable r = onEnd;
            if (r != null) {
                r.run();
            }
        }
    }

    private static ByteBuf generateJson(InferenceResponse r) {
        ByteBuf buf = Unpooled.buffer(128);
        try (JsonGenerator g = Json.generator(buf)) {
            g.writeStartObject();
            g.writeStringField("model_name", r.modelName());
            g.writeStringField("model_version", Long.toString(r.modelVersion()));
            if (!r.requestId().isEmpty()) {
                g.writeStringField("id", r.requestId());
            }
            InferCodec.writeParameters(g, r.parameters());
            for (Tensor t : r.outputs()) {
                if (t.memoryType() == io.backplane.spi.MemoryType.GPU) {
                    throw BackplaneException.internal("model '" + r.modelName() + "' returned output '" + t.name()
                            + "' in GPU memory; the http frontend needs host tensors");
                }
                g.writeFieldName(t.name());
                TensorJson.writeValue(g, t);
            }
            g.writeEndObject();
        } catch (IOException e) {
            buf.release();
            throw new UncheckedIOException(e);
        }
        return buf;
    }

    private void repository(FullHttpRequest req, List<String> seg, String path, Reply reply) {
        int n = seg.size();
        requireMethod(req.method(), HttpMethod.POST, path);
        if (n == 3 && seg.get(2).equals("index")) {
            boolean readyOnly = false;
            if (req.content().readableBytes() > 0) {
                JsonNode root = InferCodec.readJson(req.content());
                JsonNode r = root.get("ready");
                if (r != null && !r.isBoolean()) {
                    throw BackplaneException.invalid("'ready' must be true or false, not " + r);
                }
                readyOnly = r != null && r.booleanValue();
            }
            reply.send(Responses.json(HttpResponseStatus.OK, index(service.repositoryIndex(), readyOnly), reply.keepAlive));
            return;
        }
        if (n == 5 && seg.get(2).equals("models") && (seg.get(4).equals("load") || seg.get(4).equals("unload"))) {
            String model = seg.get(3);
            boolean load = seg.get(4).equals("load");
            LoadOverride override = LoadOverride.NONE;
            if (req.content().readableBytes() > 0) {
                JsonNode root = InferCodec.readJson(req.content());
                JsonNode p = root.get("parameters");
                if (p != null && p.size() > 0) {
                    if (!load) {
                        throw new BackplaneException(ErrorCode.UNSUPPORTED, "repository unload parameters " + p + " are not supported");
                    }
                    override = loadOverride(model, p);
                }
            }
            LoadOverride o = override;
            try {
                admin.execute(() -> {
                    try {
                        if (load) {
                            service.load(model, o);
                        } else {
                            service.unload(model);
                        }
                        reply.send(Responses.empty(HttpResponseStatus.OK, reply.keepAlive));
                    } catch (Throwable t) {
                        reply.fail(t);
                    }
                });
            } catch (RejectedExecutionException e) {
                throw BackplaneException.unavailable("the http frontend is shutting down");
            }
            return;
        }
        throw notFound(path);
    }

    /** Triton's load parameters: {@code config} (a JSON string) and {@code file:<path>} (base64 strings). */
    private static LoadOverride loadOverride(String model, JsonNode parameters) {
        if (!parameters.isObject()) {
            throw BackplaneException.invalid("'parameters' of a load must be an object, not " + parameters);
        }
        LoadParameters lp = LoadParameters.of(model);
        for (var it = parameters.properties().iterator(); it.hasNext();) {
            var e = it.next();
            if (!e.getValue().isTextual()) {
                throw lp.wrongType(e.getKey(), e.getValue().getNodeType().toString().toLowerCase(java.util.Locale.ROOT));
            }
            lp.text(e.getKey(), e.getValue().textValue());
        }
        return lp.override();
    }

    /** Triton's statistics extension body: {@code {"model_stats":[...]}}. */
    private static ByteBuf statistics(List<ModelStatistics> all) {
        return write(g -> {
            g.writeStartObject();
            g.writeArrayFieldStart("model_stats");
            for (ModelStatistics st : all) {
                g.writeStartObject();
                g.writeStringField("name", st.name());
                g.writeStringField("version", Long.toString(st.version()));
                g.writeNumberField("last_inference", st.lastInference());
                g.writeNumberField("inference_count", st.inferenceCount());
                g.writeNumberField("execution_count", st.executionCount());
                g.writeObjectFieldStart("inference_stats");
                duration(g, "success", st.success());
                duration(g, "fail", st.fail());
                duration(g, "queue", st.queue());
                duration(g, "compute_input", st.computeInput());
                duration(g, "compute_infer", st.computeInfer());
                duration(g, "compute_output", st.computeOutput());
                duration(g, "cache_hit", st.cacheHit());
                duration(g, "cache_miss", st.cacheMiss());
                g.writeEndObject();
                g.writeArrayFieldStart("batch_stats");
                for (ModelStatistics.BatchStatistics b : st.batches()) {
                    g.writeStartObject();
                    g.writeNumberField("batch_size", b.batchSize());
                    duration(g, "compute_input", b.computeInput());
                    duration(g, "compute_infer", b.computeInfer());
                    duration(g, "compute_output", b.computeOutput());
                    g.writeEndObject();
                }
                g.writeEndArray();
                g.writeArrayFieldStart("memory_usage");
                for (ModelStatistics.MemoryUsage mu : st.memoryUsage()) {
                    g.writeStartObject();
                    g.writeStringField("type", mu.type());
                    g.writeNumberField("id", mu.id());
                    g.writeNumberField("byte_size", mu.bytes());
                    g.writeEndObject();
                }
                g.writeEndArray();
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeEndObject();
        });
    }

    private static void duration(JsonGenerator g, String name, ModelStatistics.Duration d) throws IOException {
        g.writeObjectFieldStart(name);
        g.writeNumberField("count", d.count());
        g.writeNumberField("ns", d.nanos());
        g.writeEndObject();
    }

    private ByteBuf serverMetadata() {
        return write(g -> {
            g.writeStartObject();
            g.writeStringField("name", "backplane");
            g.writeStringField("version", service.version());
            g.writeArrayFieldStart("extensions");
            for (String e : Extensions.served(logs != null, tracer.serves())) {
                g.writeString(e);
            }
            g.writeEndArray();
            g.writeEndObject();
        });
    }

    private static ByteBuf modelMetadata(ModelMetadata md) {
        return write(g -> {
            g.writeStartObject();
            g.writeStringField("name", md.name());
            g.writeArrayFieldStart("versions");
            for (long v : md.versions()) {
                g.writeString(Long.toString(v));
            }
            g.writeEndArray();
            g.writeStringField("platform", md.platform().isEmpty() ? md.backend() : md.platform());
            tensors(g, "inputs", md.inputs());
            tensors(g, "outputs", md.outputs());
            g.writeEndObject();
        });
    }

    private static void tensors(JsonGenerator g, String field, List<ModelMetadata.TensorMetadata> ts) throws IOException {
        g.writeArrayFieldStart(field);
        for (ModelMetadata.TensorMetadata t : ts) {
            g.writeStartObject();
            g.writeStringField("name", t.name());
            g.writeStringField("datatype", t.datatype().protocolName());
            g.writeArrayFieldStart("shape");
            for (long d : t.shape()) {
                g.writeNumber(d);
            }
            g.writeEndArray();
            g.writeEndObject();
        }
        g.writeEndArray();
    }

    private static ByteBuf index(List<ModelStatus> index, boolean readyOnly) {
        return write(g -> {
            g.writeStartArray();
            for (ModelStatus s : index) {
                if (readyOnly && s.state() != ModelState.READY) {
                    continue;
                }
                g.writeStartObject();
                g.writeStringField("name", s.name());
                if (s.version() > 0) {
                    g.writeStringField("version", Long.toString(s.version()));
                }
                g.writeStringField("state", s.state().name());
                g.writeStringField("reason", s.reason() == null ? "" : s.reason());
                g.writeEndObject();
            }
            g.writeEndArray();
        });
    }

    @FunctionalInterface
    interface JsonWriter {
        void write(JsonGenerator g) throws IOException;
    }

    static ByteBuf write(JsonWriter w) {
        ByteBuf buf = Unpooled.buffer(256);
        try (JsonGenerator g = Json.generator(buf)) {
            w.write(g);
        } catch (IOException e) {
            buf.release();
            throw new UncheckedIOException(e);
        }
        return buf;
    }

    private static void requireMethod(HttpMethod actual, HttpMethod expected, String path) {
        if (!actual.equals(expected)) {
            throw new MethodNotAllowed(path + " accepts " + expected + ", not " + actual);
        }
    }

    private static BackplaneException notFound(String path) {
        return BackplaneException.notFound("no endpoint at '" + path + "'; see /v2, /v2/health/{live,ready}, /v2/models/{model}[/versions/{v}][/ready|/config|/stats|/infer|/generate|/generate_stream], /v2/repository/...");
    }

    private static final class MethodNotAllowed extends RuntimeException {
        @java.io.Serial
        private static final long serialVersionUID = 1L;

        MethodNotAllowed(String message) {
            super(message);
        }
    }

    /** The error answer for {@code t}: its {@link ProtocolErrors category}'s HTTP status and message. */
    static FullHttpResponse errorResponse(Throwable t, boolean keepAlive) {
        if (ProtocolErrors.unwrap(t) instanceof MethodNotAllowed m) {
            return Responses.error(HttpResponseStatus.METHOD_NOT_ALLOWED, String.valueOf(m.getMessage()), keepAlive);
        }
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving an http request", ProtocolErrors.unwrap(t));
        }
        BackplaneException b = ProtocolErrors.classify(t);
        return Responses.error(HttpResponseStatus.valueOf(b.code().httpStatus()), String.valueOf(b.getMessage()), keepAlive);
    }
}
