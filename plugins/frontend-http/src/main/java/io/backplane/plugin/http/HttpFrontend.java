package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.RequestTracer;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpResponseEncoder;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The REST server. Threads: {@code backplane-http-boss-*} accepts, {@code backplane-http-io-*}
 * parse and write, {@code backplane-http-admin-*} run blocking repository calls (load, unload)
 * off the event loops. Inference never blocks an event loop: the host's future completes the
 * response from whatever thread ends the request.
 */
final class HttpFrontend implements Frontend {
    private static final Logger log = LoggerFactory.getLogger(HttpFrontend.class);

    private enum State { NEW, RUNNING, CLOSED }

    private final InferenceService service;
    private final FrontendOptions options;
    private final AtomicReference<State> state = new AtomicReference<>(State.NEW);
    /** How long close waits, after the drain, for replies already sent but not yet written. */
    private static final long FLUSH_MILLIS = 2000;
    private final AtomicInteger inFlight = new AtomicInteger();
    /** Regions registered through this frontend; unmapped at close (after in-flight requests drain). */
    private final SystemSharedMemory shm;
    private final boolean ownsShm;
    private @Nullable EventLoopGroup boss;
    private @Nullable EventLoopGroup workers;
    private @Nullable ExecutorService admin;
    private @Nullable Channel serverChannel;
    private volatile String endpoint = "";
    private final ConnectionGuard.Limiter limiter;
    private final OpenReplies replies = new OpenReplies(inFlight);
    static final int MAX_HEADER_BYTES = 64 * 1024;

    private final @Nullable LogControl logs;
    private final RequestTracer tracer;

    HttpFrontend(InferenceService service, FrontendOptions options) {
        this(service, options, null, new FrontendContext.Shared<>(new SystemSharedMemory(), true), RequestTracer.NONE);
    }

    HttpFrontend(InferenceService service, FrontendOptions options, @Nullable LogControl logs, FrontendContext.Shared<SystemSharedMemory> shm,
            RequestTracer tracer) {
        this.logs = logs;
        this.tracer = tracer;
        this.shm = shm.value();
        this.ownsShm = shm.callerCloses();
        this.service = requireNonNull(service, "service is null");
        this.options = requireNonNull(options, "options is null");
        this.limiter = new ConnectionGuard.Limiter(options.maxConnections());
    }

    /** Requests received and not yet answered. */
    int inFlight() {
        return inFlight.get();
    }

    /** Open connections, for tests. */
    int openConnections() {
        return limiter.open();
    }

    @Override
    public void start() throws Exception {
        if (!state.compareAndSet(State.NEW, State.RUNNING)) {
            throw new IllegalStateException("http frontend already started or closed");
        }
        boss = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("backplane-http-boss", true), NioIoHandler.newFactory());
        workers = new MultiThreadIoEventLoopGroup(options.threads(), new DefaultThreadFactory("backplane-http-io", true), NioIoHandler.newFactory());
        AtomicInteger adminIds = new AtomicInteger();
        admin = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "backplane-http-admin-" + adminIds.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        RestRouter router = new RestRouter(service, admin, replies, shm, options.restricted(), logs, tracer, options.healthJson(),
                options.maxBodyBytes());
        try {
            SslContext ssl = options.sslCert() == null ? null
                    : SslContextBuilder.forServer(requireNonNull(options.sslCert()).toFile(), requireNonNull(options.sslKey()).toFile()).build();
            ServerBootstrap b = new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                    .option(ChannelOption.SO_BACKLOG, 1024)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ConnectionGuard guard = new ConnectionGuard(limiter, options);
                            ch.pipeline().addLast("connection", guard);
                            if (ssl != null) {
                                ch.pipeline().addLast("tls", ssl.newHandler(ch.alloc()));
                            }
                            ch.pipeline().addLast("decoder", new StrictRequestDecoder(MAX_HEADER_BYTES))
                                    .addLast("encoder", new HttpResponseEncoder())
                                    .addLast("framing", new FramingGuard(guard))
                                    .addLast("admission", new BodyAdmission(service, guard, options.maxBodyBytes(), options.maxBinaryBodyBytes()))
                                    .addLast("aggregator", new LimitedAggregator(Math.max(options.maxBodyBytes(), options.maxBinaryBodyBytes())))
                                    .addLast("order", new PipelineOrder(guard, options.maxPipelined()))
                                    .addLast("rest", router);
                        }
                    });
            serverChannel = b.bind(new InetSocketAddress(options.host(), options.port())).sync().channel();
        } catch (Exception | Error e) {
            close();
            throw e;
        }
        InetSocketAddress bound = (InetSocketAddress) requireNonNull(serverChannel).localAddress();
        endpoint = (options.sslCert() == null ? "http://" : "https://") + options.host() + ":" + bound.getPort();
        log.info("http frontend serving at {} (max JSON body {} bytes, {} event loops, at most {} connections, restricted apis {})", endpoint,
                options.maxBodyBytes(), options.threads(), options.maxConnections(), options.restricted().table().keySet());
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
     * Stops accepting at once; requests that arrive on open connections from now on are answered
     * 503 and their connections closed; requests still open after {@code drain_timeout_ms} are
     * answered 503 (event streams already under way are ended); then the threads stop.
     */
    @Override
    public void close() {
        State previous = state.getAndSet(State.CLOSED);
        if (previous == State.CLOSED) {
            return;
        }
        replies.drain();
        Channel c = serverChannel;
        if (c != null) {
            c.close().syncUninterruptibly();
        }
        if (!replies.awaitIdle(options.drainMillis())) {
            int n = replies.failOpen("the server is shutting down and the request did not finish within the exit timeout");
            log.warn("http frontend: {} request(s) still open after {} ms answered 503", n, options.drainMillis());
            // A reply the host sent just before (the unload failing what pinned the model, racing this close) is open
            // until written, its write queued on an event loop; stopping the loops closes their channels before they run
            // what is queued, so wait (bounded) for those writes too.
            if (!replies.awaitIdle(FLUSH_MILLIS)) {
                log.warn("http frontend: replies still unwritten {} ms after the drain; closing their connections", FLUSH_MILLIS);
            }
        }
        ExecutorService a = admin;
        if (a != null) {
            a.shutdownNow();
        }
        shutdown(workers);
        shutdown(boss);
        if (a != null) {
            try {
                if (!a.awaitTermination(10, TimeUnit.SECONDS)) {
                    log.warn("http frontend: a repository call is still running after close");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (ownsShm) {
            shm.close();
        }
        log.info("http frontend at {} closed", endpoint);
    }

    private static void shutdown(@Nullable EventLoopGroup group) {
        if (group != null) {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }
}
