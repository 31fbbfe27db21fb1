package io.backplane.plugin.metrics;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Serves the registry's Prometheus text at {@code /metrics}; one event-loop thread, {@code backplane-metrics-*}. */
final class MetricsFrontend implements Frontend {
    private static final Logger log = LoggerFactory.getLogger(MetricsFrontend.class);
    static final Set<String> OPTIONS = Set.of("host", "port", "backplane_names", "triton_names");

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final MetricsListener listener;
    private final @Nullable TritonMetrics triton;
    private final boolean backplane;
    private final InferenceService service;
    private final String host;
    private final int port;
    private final AtomicBoolean started = new AtomicBoolean();
    private final AtomicBoolean closed = new AtomicBoolean();
    private @Nullable EventLoopGroup group;
    private @Nullable Channel channel;
    private volatile String endpoint = "";

    MetricsFrontend(InferenceService service, Map<String, String> options) {
        Set<String> unknown = new TreeSet<>(options.keySet());
        unknown.removeAll(OPTIONS);
        if (!unknown.isEmpty()) {
            throw BackplaneException.invalid("metrics plugin: unknown option(s) " + unknown + "; known options: " + new TreeSet<>(OPTIONS));
        }
        this.service = service;
        this.host = options.getOrDefault("host", "0.0.0.0");
        String p = options.getOrDefault("port", "8002");
        try {
            this.port = Integer.parseInt(p.trim());
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid("metrics plugin: option port='" + p + "' is not an integer");
        }
        if (port < 0 || port > 65535) {
            throw BackplaneException.invalid("metrics plugin: option port=" + port + " is out of range [0, 65535]");
        }
        this.backplane = flag(options, "backplane_names");
        this.triton = flag(options, "triton_names") ? new TritonMetrics() : null;
        if (!backplane && triton == null) {
            throw BackplaneException.invalid("metrics plugin: backplane_names=false and triton_names=false leave nothing to serve;"
                    + " keep one family on, or disable the metrics plugin");
        }
        this.listener = new MetricsListener(registry, backplane, triton);
    }

    private static boolean flag(Map<String, String> options, String key) {
        String v = options.getOrDefault(key, "true").trim();
        return switch (v) {
            case "true" -> true;
            case "false" -> false;
            default -> throw BackplaneException.invalid("metrics plugin: option " + key + "='" + v + "' must be true or false");
        };
    }

    /** The registry behind {@code /metrics} (for tests and embedding). */
    PrometheusMeterRegistry registry() {
        return registry;
    }

    @Override
    public void start() throws Exception {
        if (!started.compareAndSet(false, true)) {
            throw new IllegalStateException("metrics plugin already started");
        }
        if (backplane) {
            Gauge.builder("backplane.server.live", service, s -> s.isLive() ? 1 : 0).description("1 while the host runs").register(registry);
            Gauge.builder("backplane.server.ready", service, s -> s.isReady() ? 1 : 0)
                    .description("1 while every loaded model has a ready version (strict readiness)").register(registry);
        }
        service.addListener(listener);
        for (ModelStatus s : service.repositoryIndex()) {
            if (s.state() == ModelState.READY) {
                listener.versionLoaded(s.name(), s.version());
            }
        }
        group = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("backplane-metrics", true), NioIoHandler.newFactory());
        try {
            channel = new ServerBootstrap().group(group).channel(NioServerSocketChannel.class).childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(64 * 1024), new Scrape());
                }
            }).bind(new InetSocketAddress(host, port)).sync().channel();
        } catch (Exception | Error e) {
            close();
            throw e;
        }
        endpoint = "http://" + host + ":" + port() + "/metrics";
        log.info("metrics served at {}", endpoint);
    }

    int port() {
        Channel c = channel;
        return c == null ? -1 : ((InetSocketAddress) c.localAddress()).getPort();
    }

    @Override
    public String endpoint() {
        return endpoint;
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        listener.stop();
        Channel c = channel;
        if (c != null) {
            c.close().syncUninterruptibly();
        }
        EventLoopGroup g = group;
        if (g != null) {
            g.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
        registry.close();
    }

    @ChannelHandler.Sharable
    private final class Scrape extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            String path = req.uri();
            int q = path.indexOf('?');
            if (q >= 0) {
                path = path.substring(0, q);
            }
            FullHttpResponse r;
            if (!path.equals("/metrics")) {
                r = text(HttpResponseStatus.NOT_FOUND, "{\"error\": \"no endpoint at '" + path.replace("\"", "") + "'; metrics are at /metrics\"}",
                        HttpHeaderValues.APPLICATION_JSON);
            } else if (!req.method().equals(HttpMethod.GET)) {
                r = text(HttpResponseStatus.METHOD_NOT_ALLOWED, "{\"error\": \"/metrics accepts GET\"}", HttpHeaderValues.APPLICATION_JSON);
            } else {
                r = text(HttpResponseStatus.OK, scrape(), "text/plain; version=0.0.4; charset=utf-8");
            }
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            if (!keepAlive) {
                r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
            }
            var f = ctx.writeAndFlush(r);
            if (!keepAlive) {
                f.addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    /** Both families and the models' custom metrics in one Prometheus text body. */
    String scrape() {
        StringBuilder out = new StringBuilder(backplane ? registry.scrape() : "");
        out.append(CustomMetricsText.render(service.customMetrics()));
        if (backplane) {
            memory(out, service.memoryUsage());
        }
        TritonMetrics t = triton;
        if (t != null) {
            t.render(out);
        }
        return out.toString();
    }

    /** The host's memory budget (O1): its limit, what requests hold now, and the requests it refused. */
    static void memory(StringBuilder out, io.backplane.spi.host.MemoryReservation.Usage u) {
        if (u.limitBytes() == Long.MAX_VALUE) {
            return;
        }
        out.append("# HELP backplane_memory_budget_bytes Bytes requests may hold at once (the host's memory budget)\n")
                .append("# TYPE backplane_memory_budget_bytes gauge\nbackplane_memory_budget_bytes ").append(u.limitBytes()).append('\n')
                .append("# HELP backplane_memory_held_bytes Bytes held now by requests read or being answered\n")
                .append("# TYPE backplane_memory_held_bytes gauge\nbackplane_memory_held_bytes ").append(u.heldBytes()).append('\n')
                .append("# HELP backplane_memory_refused_total Requests refused because the memory budget could not hold them\n")
                .append("# TYPE backplane_memory_refused_total counter\nbackplane_memory_refused_total ").append(u.refused()).append('\n');
    }

    private static FullHttpResponse text(HttpResponseStatus status, String body, CharSequence type) {
        ByteBuf buf = Unpooled.copiedBuffer(body, StandardCharsets.UTF_8);
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, buf);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, type).set(HttpHeaderNames.CONTENT_LENGTH, buf.readableBytes());
        return r;
    }
}
