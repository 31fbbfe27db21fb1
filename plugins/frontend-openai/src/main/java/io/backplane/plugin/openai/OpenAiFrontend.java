package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.MemoryReservation;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OpenAI-compatible server. Threads: {@code backplane-openai-boss-*} accepts,
 * {@code backplane-openai-io-*} parse and write, virtual threads named {@code backplane-openai-work}
 * answer (a model's tokenizer is read and its chat template rendered there, never on an event
 * loop). A request's body is admitted against the host's memory budget (O1) before it is read.
 */
final class OpenAiFrontend implements Frontend {
    private static final Logger log = LoggerFactory.getLogger(OpenAiFrontend.class);
    private static final long FLUSH_MILLIS = 2000;

    private enum State { NEW, RUNNING, CLOSED }

    private final InferenceService service;
    private final OpenAiOptions options;
    private final ModelFiles files;
    private final AtomicReference<State> state = new AtomicReference<>(State.NEW);
    private final Set<Exchange> open = ConcurrentHashMap.newKeySet();
    private final java.util.concurrent.atomic.AtomicInteger connections = new java.util.concurrent.atomic.AtomicInteger();
    private final Object idle = new Object();
    private volatile boolean closing;
    private volatile long startedSeconds;
    private volatile String endpoint = "";
    private @Nullable EventLoopGroup boss;
    private @Nullable EventLoopGroup workers;
    private @Nullable ExecutorService work;
    private @Nullable Channel serverChannel;

    OpenAiFrontend(InferenceService service, OpenAiOptions options) {
        this.service = requireNonNull(service, "service is null");
        this.options = requireNonNull(options, "options is null");
        this.files = new ModelFiles(service);
        if (System.getProperty("ai.djl.offline") == null && System.getenv("DJL_OFFLINE") == null) {
            // the tokenizers' native library is in DJL's jar: nothing is ever downloaded (a server may have no network)
            System.setProperty("ai.djl.offline", "true");
        }
    }

    InferenceService service() {
        return service;
    }

    OpenAiOptions options() {
        return options;
    }

    ModelFiles modelFiles() {
        return files;
    }

    boolean closing() {
        return closing;
    }

    long startedSeconds() {
        return startedSeconds;
    }

    void opened(Exchange ex) {
        open.add(ex);
    }

    void ended(Exchange ex) {
        open.remove(ex);
        if (open.isEmpty()) {
            synchronized (idle) {
                idle.notifyAll();
            }
        }
    }

    /** Requests received and not yet answered, for tests. */
    int openRequests() {
        return open.size();
    }

    @Override
    public void start() throws Exception {
        if (!state.compareAndSet(State.NEW, State.RUNNING)) {
            throw new IllegalStateException("openai frontend already started or closed");
        }
        startedSeconds = System.currentTimeMillis() / 1000;
        boss = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("backplane-openai-boss", true), NioIoHandler.newFactory());
        workers = new MultiThreadIoEventLoopGroup(options.threads(), new DefaultThreadFactory("backplane-openai-io", true), NioIoHandler.newFactory());
        ExecutorService w = Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("backplane-openai-work-", 0).factory());
        work = w;
        try {
            ServerBootstrap b = new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                    .option(ChannelOption.SO_BACKLOG, 1024)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            if (options.idleTimeoutMillis() > 0) {
                                ch.pipeline().addLast("idle", new io.netty.handler.timeout.IdleStateHandler(0, 0, options.idleTimeoutMillis(),
                                        TimeUnit.MILLISECONDS));
                            }
                            ch.pipeline().addLast("codec", new HttpServerCodec(4096, 64 * 1024, 64 * 1024))
                                    .addLast("admission", new Admission())
                                    .addLast("aggregator", new Aggregator(options.maxBodyBytes()))
                                    .addLast("openai", new OpenAiHandler(OpenAiFrontend.this, w));
                        }
                    });
            serverChannel = b.bind(new InetSocketAddress(options.host(), options.port())).sync().channel();
        } catch (Exception | Error e) {
            close();
            throw e;
        }
        InetSocketAddress bound = (InetSocketAddress) requireNonNull(serverChannel).localAddress();
        endpoint = "http://" + options.host() + ":" + bound.getPort();
        log.info("openai frontend serving at {} (/v1/models, /v1/completions, /v1/chat/completions, /v1/embeddings; API key {}, max body {} bytes, "
                + "restricted apis {})", endpoint, options.apiKey() == null ? "not asked" : "asked", options.maxBodyBytes(),
                options.restricted().table().keySet());
    }

    @Override
    public String endpoint() {
        return endpoint;
    }

    /** The bound port, once started. */
    int port() {
        Channel c = serverChannel;
        return c == null ? -1 : ((InetSocketAddress) c.localAddress()).getPort();
    }

    /**
     * Stops accepting at once; requests arriving on open connections are answered 503; requests
     * still open after {@code drain_timeout_ms} are ended (a stream with an error event, others
     * 503) and cancelled; then the threads stop and the tokenizers are freed.
     */
    @Override
    public void close() {
        State previous = state.getAndSet(State.CLOSED);
        if (previous == State.CLOSED) {
            return;
        }
        closing = true;
        Channel c = serverChannel;
        if (c != null) {
            c.close().syncUninterruptibly();
        }
        if (!awaitIdle(options.drainMillis())) {
            List<Exchange> left = List.copyOf(open);
            BackplaneException e = new BackplaneException(ErrorCode.UNAVAILABLE,
                    "the server is shutting down and the request did not finish within the exit timeout");
            for (Exchange ex : left) {
                ex.abort(e);
            }
            log.warn("openai frontend: {} request(s) still open after {} ms ended", left.size(), options.drainMillis());
            awaitIdle(FLUSH_MILLIS);
        }
        ExecutorService w = work;
        if (w != null) {
            w.shutdownNow();
        }
        shutdown(workers);
        shutdown(boss);
        if (w != null) {
            try {
                if (!w.awaitTermination(10, TimeUnit.SECONDS)) {
                    log.warn("openai frontend: a request is still being prepared after close");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        files.close();
        log.info("openai frontend at {} closed", endpoint);
    }

    private boolean awaitIdle(long millis) {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        synchronized (idle) {
            while (!open.isEmpty()) {
                long left = end - System.nanoTime();
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
        }
        return true;
    }

    private static void shutdown(@Nullable EventLoopGroup group) {
        if (group != null) {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    /** 413 as an OpenAI error, and the connection closed (the rest of the body is not read). */
    private static final class Aggregator extends HttpObjectAggregator {
        Aggregator(int max) {
            super(max);
        }

        @Override
        protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
            ApiError e = new ApiError(413, "the request body is larger than this server takes (" + maxContentLength() + " bytes, the openai "
                    + "frontend's max_body_bytes)", "invalid_request_error", null, null);
            FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, Json.bytes(e.body()));
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON);
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
            HttpUtil.setContentLength(r, r.content().readableBytes());
            ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
        }
    }

    /** A connection's reservations, one per request read, in order: the handler takes each with its request. */
    static final io.netty.util.AttributeKey<java.util.ArrayDeque<MemoryReservation>> RESERVATIONS =
            io.netty.util.AttributeKey.valueOf(OpenAiFrontend.class, "openaiReservations");

    /**
     * O1 and O2 at the door. A request's announced body is reserved in the host's memory budget
     * before it is read (a body of unknown length grows its reservation as it arrives) and held
     * until its answer is written; a refused one is answered 503, the rest of its body read and
     * dropped, and its connection closed. A body announced larger than {@code max_body_bytes} is
     * left to the aggregator's 413. A connection above {@code max_connections} is closed at once;
     * one that sends nothing for {@code idle_timeout_ms} while no answer of it is under way is closed.
     */
    private final class Admission extends ChannelInboundHandlerAdapter {
        private @Nullable MemoryReservation reading;
        private boolean refusing;
        /** The body's length was not announced: its reservation grows as it arrives. */
        private boolean growing;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            if (connections.incrementAndGet() > options.maxConnections()) {
                log.warn("openai frontend: {} connections open, more than max_connections {}; closing the new one from {}", connections.get(),
                        options.maxConnections(), ctx.channel().remoteAddress());
                ctx.close();
                return;
            }
            ctx.channel().attr(RESERVATIONS).set(new java.util.ArrayDeque<>());
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof HttpRequest req) {
                refusing = false;
                growing = !HttpUtil.isContentLengthSet(req);
                long len = HttpUtil.getContentLength(req, 0L);
                if (len <= options.maxBodyBytes()) {
                    try {
                        reading = service.reserveMemory(len, req.method() + " " + req.uri());
                    } catch (BackplaneException e) {
                        refuse(ctx, msg, e);
                        return;
                    }
                }
            } else if (refusing) {
                boolean last = msg instanceof LastHttpContent;
                ReferenceCountUtil.release(msg);
                if (last) {
                    ctx.close();
                }
                return;
            } else if (msg instanceof io.netty.handler.codec.http.HttpContent c && reading != null && growing) {
                try {
                    reading.grow(c.content().readableBytes());
                } catch (BackplaneException e) {
                    refuse(ctx, msg, e);
                    return;
                }
            }
            boolean last = msg instanceof LastHttpContent;
            if (last) {
                MemoryReservation r = reading;
                reading = null;
                if (r != null) {
                    java.util.ArrayDeque<MemoryReservation> q = ctx.channel().attr(RESERVATIONS).get();
                    if (q != null) {
                        q.add(r);
                    } else {
                        r.close();
                    }
                }
            }
            ctx.fireChannelRead(msg);
        }


        private void refuse(ChannelHandlerContext ctx, Object msg, BackplaneException e) {
            boolean last = msg instanceof LastHttpContent;
            ReferenceCountUtil.release(msg);
            MemoryReservation r = reading;
            reading = null;
            if (r != null) {
                r.close();
            }
            refusing = true;
            ApiError err = new ApiError(503, String.valueOf(e.getMessage()), "service_unavailable_error", null, null);
            FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.SERVICE_UNAVAILABLE, Json.bytes(err.body()));
            resp.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON);
            resp.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
            HttpUtil.setContentLength(resp, resp.content().readableBytes());
            // the rest of the body is read and dropped, so the client reads the answer rather than a reset; then the connection closes
            ctx.writeAndFlush(resp).addListener(f -> {
                if (last) {
                    ctx.close();
                }
            });
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt instanceof io.netty.handler.timeout.IdleStateEvent && !OpenAiHandler.busy(ctx.channel())) {
                log.debug("openai frontend: closing {}, idle for {} ms", ctx.channel().remoteAddress(), options.idleTimeoutMillis());
                ctx.close();
                return;
            }
            ctx.fireUserEventTriggered(evt);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            connections.decrementAndGet();
            MemoryReservation r = reading;
            reading = null;
            if (r != null) {
                r.close();
            }
            java.util.ArrayDeque<MemoryReservation> q = ctx.channel().attr(RESERVATIONS).get();
            if (q != null) {
                for (MemoryReservation m; (m = q.poll()) != null;) {
                    m.close();
                }
            }
            ctx.fireChannelInactive();
        }
    }
}
