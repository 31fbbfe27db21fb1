package io.backplane.plugin.grpc;

import static java.util.Objects.requireNonNull;

import io.backplane.protocol.AliasingMarshaller;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.metrics.MetricRegistry;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gRPC server, on grpc-netty-shaded: gRPC brings its own (shaded) Netty 4.2, so its version never
 * has to agree exactly with the REST frontend's managed Netty. Threads: {@code backplane-grpc-boss-*},
 * {@code backplane-grpc-io-*} (calls run here, direct executor, never blocking) and
 * {@code backplane-grpc-admin-*} (repository load and unload). Serves {@code inference.GRPCInferenceService}
 * and the standard {@code grpc.health.v1.Health} ({@link HealthService}).
 */
final class GrpcFrontend implements Frontend {
    private static final Logger log = LoggerFactory.getLogger(GrpcFrontend.class);

    private enum State { NEW, RUNNING, CLOSED }

    private final InferenceService service;
    private final GrpcOptions options;
    private final AtomicReference<State> state = new AtomicReference<>(State.NEW);
    /** Regions registered through this frontend; unmapped at close (after open calls end). */
    private final SystemSharedMemory shm;
    private final boolean ownsShm;
    private @Nullable Server server;
    private @Nullable EventLoopGroup boss;
    private @Nullable EventLoopGroup workers;
    private @Nullable ExecutorService admin;
    private volatile String endpoint = "";
    /** Connections open now ({@link CappedServerChannel}). */
    private final AtomicInteger connections = new AtomicInteger();

    private final io.backplane.spi.host.@Nullable LogControl logs;
    private final io.backplane.spi.host.RequestTracer tracer;
    /** The host's metrics for this frontend; null when it gives none. */
    private final @Nullable MetricRegistry metrics;
    private @Nullable MalformedMessages malformed;
    private @Nullable HealthService health;

    GrpcFrontend(InferenceService service, GrpcOptions options) {
        this(service, options, null, new FrontendContext.Shared<>(new SystemSharedMemory(), true), io.backplane.spi.host.RequestTracer.NONE, null);
    }

    GrpcFrontend(InferenceService service, GrpcOptions options, io.backplane.spi.host.@Nullable LogControl logs,
            FrontendContext.Shared<SystemSharedMemory> shm, io.backplane.spi.host.RequestTracer tracer, @Nullable MetricRegistry metrics) {
        this.metrics = metrics;
        this.logs = logs;
        this.tracer = tracer;
        this.shm = shm.value();
        this.ownsShm = shm.callerCloses();
        this.service = requireNonNull(service, "service is null");
        this.options = requireNonNull(options, "options is null");
    }

    @Override
    public void start() throws Exception {
        if (!state.compareAndSet(State.NEW, State.RUNNING)) {
            throw new IllegalStateException("grpc frontend already started or closed");
        }
        boss = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("backplane-grpc-boss", true), NioIoHandler.newFactory());
        workers = new MultiThreadIoEventLoopGroup(options.threads(), new DefaultThreadFactory("backplane-grpc-io", true), NioIoHandler.newFactory());
        AtomicInteger ids = new AtomicInteger();
        admin = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "backplane-grpc-admin-" + ids.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        try {
            InetSocketAddress address = new InetSocketAddress(options.host(), options.port());
            InboundBudget budget = new InboundBudget(service);
            MalformedMessages guard = new MalformedMessages(metrics);
            malformed = guard;
            HealthService h = new HealthService(service);
            health = h;
            workers.scheduleWithFixedDelay(h::poll, HealthService.WATCH_INTERVAL_MILLIS, HealthService.WATCH_INTERVAL_MILLIS, TimeUnit.MILLISECONDS);
            NettyServerBuilder builder = options.sslCert() == null ? NettyServerBuilder.forAddress(address)
                    : NettyServerBuilder.forAddress(address, credentials(options));
            if (options.maxConnectionIdleMillis() > 0) {
                builder.maxConnectionIdle(options.maxConnectionIdleMillis(), TimeUnit.MILLISECONDS);
            }
            if (options.maxConnectionAgeMillis() > 0) {
                builder.maxConnectionAge(options.maxConnectionAgeMillis(), TimeUnit.MILLISECONDS)
                        .maxConnectionAgeGrace(options.maxConnectionAgeGraceMillis(), TimeUnit.MILLISECONDS);
            }
            server = builder.keepAliveTime(options.keepaliveTimeMillis(), TimeUnit.MILLISECONDS)
                    .keepAliveTimeout(options.keepaliveTimeoutMillis(), TimeUnit.MILLISECONDS)
                    .permitKeepAliveTime(options.permitKeepaliveTimeMillis(), TimeUnit.MILLISECONDS)
                    .permitKeepAliveWithoutCalls(options.permitKeepaliveWithoutCalls())
                    .handshakeTimeout(options.handshakeTimeoutMillis(), TimeUnit.MILLISECONDS)
                    .intercept(new TritonHeaders())
                    .intercept(new RestrictedProtocol(options.restricted()))
                    .intercept(budget)
                    .addStreamTracerFactory(budget)
                    .bossEventLoopGroup(boss).workerEventLoopGroup(workers)
                    .channelFactory(() -> new CappedServerChannel(connections, options.maxConnections()))
                    .directExecutor()
                    .maxInboundMessageSize(options.maxMessageBytes())
                    .flowControlWindow(options.flowControlWindowBytes())
                    .addTransportFilter(guard)
                    .addService(guard.guard(AliasingMarshaller.of(new GrpcInferenceService(service, admin, shm, logs, tracer).bindService())))
                    .addService(h)
                    .build().start();
        } catch (Exception | Error e) {
            close();
            throw e;
        }
        endpoint = (options.sslCert() == null ? "grpc://" : "grpcs://") + options.host() + ":" + requireNonNull(server).getPort();
        log.info("grpc frontend serving at {} (max message {} bytes, flow-control window {} bytes, {} event loops, at most {} connections)",
                endpoint, options.maxMessageBytes(), options.flowControlWindowBytes(), options.threads(), options.maxConnections());
    }

    private static ServerCredentials credentials(GrpcOptions o) throws IOException {
        TlsServerCredentials.Builder b = TlsServerCredentials.newBuilder()
                .keyManager(requireNonNull(o.sslCert()).toFile(), requireNonNull(o.sslKey()).toFile());
        Path root = o.sslRootCert();
        if (root != null) {
            b.trustManager(root.toFile());
        }
        if (o.sslMutual()) {
            b.clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
        }
        return b.build();
    }

    @Override
    public String endpoint() {
        return endpoint;
    }

    /** Open connections, for tests. */
    int openConnections() {
        return connections.get();
    }

    /** Open health Watch calls, for tests. */
    int openHealthWatches() {
        HealthService h = health;
        return h == null ? 0 : h.openWatches();
    }

    int port() {
        Server s = server;
        return s == null ? -1 : s.getPort();
    }

    @Override
    public void close() {
        if (state.getAndSet(State.CLOSED) == State.CLOSED) {
            return;
        }
        Server s = server;
        if (s != null) {
            s.shutdown();
            HealthService h = health;
            if (h != null) {
                h.close(); // open Watch calls never end by themselves: end them, so the drain below waits only for real calls
            }
            try {
                if (!s.awaitTermination(options.drainMillis(), TimeUnit.MILLISECONDS)) {
                    log.warn("grpc frontend: calls still open after {} ms; cancelling them", options.drainMillis());
                    s.shutdownNow();
                    s.awaitTermination(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                s.shutdownNow();
            }
        }
        ExecutorService a = admin;
        if (a != null) {
            a.shutdownNow();
        }
        for (EventLoopGroup g : new EventLoopGroup[] {workers, boss}) {
            if (g != null) {
                g.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            }
        }
        if (a != null) {
            try {
                if (!a.awaitTermination(10, TimeUnit.SECONDS)) {
                    log.warn("grpc frontend: a repository call is still running after close");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        MalformedMessages m = malformed;
        if (m != null) {
            m.close();
        }
        if (ownsShm) {
            shm.close();
        }
        log.info("grpc frontend at {} closed", endpoint);
    }
}
