package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.backplane.protocol.ModelVersions;
import io.backplane.protocol.RestrictedApis;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.RequestTracer;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The last handler of every REST connection's pipeline: decodes the path of each Open Inference
 * Protocol request and hands it to the one {@link RestRoute} registered for it. Shared by every
 * connection; all state is per request. Owns:
 * <ul>
 *   <li>one reply per request (DESIGN L1): a {@link Reply} is made before anything else is
 *       looked at, counted in {@link OpenReplies} until written, and whatever a route throws is
 *       answered on it ({@link RestErrors});
 *   <li>the checks every endpoint shares, in this order: a malformed request is 400 and closes
 *       the connection; while draining (L10) every request is 503 and closes it; a compressed body
 *       ({@code Content-Encoding} gzip or deflate) is inflated, up to {@code max_body_bytes}
 *       ({@link RequestEncoding}); a path outside {@code /v2} is 404; a restricted API without its
 *       header is 403;
 *   <li>the path grammar: {@code /v2/<extension>/...} goes to the route of its first segment,
 *       {@code /v2/models/<m>[/versions/<v>][/<action>]} to the route of its action (the model and
 *       the parsed version in the {@link RestCall}), {@code /v2/models/stats} and
 *       {@code /v2/models/<m>/trace/setting} to the statistics and trace routes;
 *   <li>the channel events flow control needs (P9), forwarded to {@link Writability}.
 * </ul>
 * It is the only class that knows the handlers; they know neither it nor each other (an ArchUnit
 * rule in {@code HttpArchitectureTest}). To add an extension: write its {@link RestRoute} and
 * register it in the constructor, under its first path segment ({@code extensions}) or, for a
 * model-scoped endpoint, its action ({@code modelActions}).
 */
@ChannelHandler.Sharable
final class RestRouter extends SimpleChannelInboundHandler<FullHttpRequest> {
    private static final Logger log = LoggerFactory.getLogger(RestRouter.class);

    private final OpenReplies replies;
    private final RestrictedApis restricted;
    /** The largest inflated body of a compressed request ({@code max_body_bytes}). */
    private final long maxInputBytes;
    private final RestRoute server;
    private final RestRoute statistics;
    private final RestRoute trace;
    /** {@code /v2/<key>/...}, by the path's first segment after {@code v2}. */
    private final Map<String, RestRoute> extensions = new HashMap<>();
    /** {@code /v2/models/<m>[/versions/<v>]/<key>}; {@code ""} is the model itself. */
    private final Map<String, RestRoute> modelActions = new HashMap<>();

    RestRouter(InferenceService service, ExecutorService admin, OpenReplies replies, SystemSharedMemory shm, RestrictedApis restricted,
            @Nullable LogControl logs, RequestTracer tracer, boolean healthJson, long maxInputBytes) {
        requireNonNull(service, "service is null");
        this.maxInputBytes = maxInputBytes;
        this.replies = requireNonNull(replies, "replies is null");
        this.restricted = requireNonNull(restricted, "restricted is null");
        server = new ServerHandler(service, logs, tracer, shm.device().available(), healthJson);
        statistics = new StatisticsHandler(service);
        trace = new TraceHandler(tracer);
        extensions.put("health", server);
        extensions.put("repository", new RepositoryHandler(service, admin));
        extensions.put("systemsharedmemory", new SystemSharedMemoryHandler(shm));
        extensions.put("cudasharedmemory", new CudaSharedMemoryHandler(shm));
        extensions.put("logging", new LoggingHandler(logs));
        extensions.put("trace", call -> {
            if (call.segments().size() != 3 || !call.segments().get(2).equals("setting")) {
                throw call.notFound();
            }
            trace.serve(call);
        });
        RestRoute model = new ModelHandler(service, healthJson);
        modelActions.put("", model);
        modelActions.put("ready", model);
        modelActions.put("config", model);
        modelActions.put("stats", statistics);
        modelActions.put("infer", new InferenceHandler(service, shm, tracer));
        RestRoute generate = new GenerateHandler(service);
        modelActions.put("generate", generate);
        modelActions.put("generate_stream", generate);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
        if (ctx.channel().isWritable()) {
            Writability.wake(ctx.channel());
        }
        super.channelWritabilityChanged(ctx);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        Writability.wake(ctx.channel());
        super.channelInactive(ctx);
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        boolean keepAlive = HttpUtil.isKeepAlive(req);
        Reply reply = new Reply(ctx, keepAlive, replies);
        if (!req.decoderResult().isSuccess()) {
            reply.sendClosing(Responses.error(HttpResponseStatus.BAD_REQUEST, "malformed HTTP request: " + req.decoderResult().cause(), false));
            return;
        }
        if (replies.draining()) {
            reply.sendClosing(Responses.error(HttpResponseStatus.SERVICE_UNAVAILABLE, "the server is shutting down; send the request to another replica", false));
            return;
        }
        FullHttpRequest inflated = null;
        try {
            inflated = RequestEncoding.inflate(req, maxInputBytes, ctx.alloc());
            route(inflated != null ? inflated : req, reply);
        } catch (Throwable t) {
            reply.fail(t);
        } finally {
            if (inflated != null) {
                inflated.release(); // the routes are done with the body when they return (they copy what they keep)
            }
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
        int n = seg.size();
        if (n == 0 || !seg.get(0).equals("v2")) {
            throw RestErrors.notFound(path);
        }
        if (!restricted.isEmpty()) {
            String refusal = restricted.refusal(RestrictedApis.restApi(seg.subList(1, n)), h -> req.headers().get(h));
            if (refusal != null) {
                reply.send(Responses.error(HttpResponseStatus.FORBIDDEN, refusal, reply.keepAlive));
                return;
            }
        }
        if (n == 1) {
            server.serve(RestCall.of(req, seg, path, reply));
            return;
        }
        if (seg.get(1).equals("models")) {
            model(req, seg, path, reply);
            return;
        }
        RestRoute r = extensions.get(seg.get(1));
        if (r == null) {
            throw RestErrors.notFound(path);
        }
        r.serve(RestCall.of(req, seg, path, reply));
    }

    private void model(FullHttpRequest req, List<String> seg, String path, Reply reply) {
        int n = seg.size();
        if (n < 3) {
            throw RestErrors.notFound(path);
        }
        if (n == 3 && seg.get(2).equals("stats")) {
            statistics.serve(RestCall.of(req, seg, path, reply));
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
            trace.serve(new RestCall(req, seg, path, reply, model, version, "trace/setting"));
            return;
        }
        String action = i == n ? "" : i == n - 1 ? seg.get(i) : null;
        RestRoute r = action == null ? null : modelActions.get(action);
        if (r == null) {
            throw RestErrors.notFound(path);
        }
        r.serve(new RestCall(req, seg, path, reply, model, version, action));
    }
}
