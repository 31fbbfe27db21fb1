package io.backplane.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.protocol.AliasingMarshaller;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelMetadataRequest;
import io.backplane.protocol.inference.ModelMetadataResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ResponseObserver;
import io.grpc.CallOptions;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.jspecify.annotations.Nullable;

/**
 * A closed-loop load generator: at concurrency {@code c}, {@code c} virtual clients each send a
 * request, wait for its response and send the next, for the warm-up and then the measured
 * duration. Requests are sent asynchronously (no thread per client), so the generator itself
 * stays light on small machines. Latency is measured per request from send to completion.
 *
 * <p>Inputs are zeros (BYTES: the one-byte string "x") shaped from the model's metadata, with
 * variable dimensions set to 1, or by {@link BenchOptions#inputShape()}. REST requests use
 * Triton's binary tensor extension for inputs and outputs, gRPC requests raw contents, as
 * perf_analyzer does.
 */
public final class Bench {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Bench() {
    }

    /** Runs every concurrency level of {@code options} and returns the measurements. */
    public static BenchResult run(BenchOptions options) throws Exception {
        if (options.embeddedRepository() != null) {
            BackplaneHost.Builder builder = BackplaneHost.builder().modelRepository(options.embeddedRepository());
            options.backendsDirectories().forEach(builder::backendsDirectory);
            try (BackplaneHost host = builder.build()) {
                return run(options, new EmbeddedDriver(host, options));
            }
        }
        if (options.service() != null) {
            return run(options, new EmbeddedDriver(options.service(), options));
        }
        if (options.grpc() != null) {
            try (GrpcDriver d = new GrpcDriver(options)) {
                return run(options, d);
            }
        }
        if (RestStreamDriver.decoupled(options)) {
            try (RestStreamDriver d = new RestStreamDriver(options)) {
                return run(options, d);
            }
        }
        try (RestDriver d = new RestDriver(options)) {
            return run(options, d);
        }
    }

    private static BenchResult run(BenchOptions options, Driver driver) throws Exception {
        List<BenchResult.Level> levels = new ArrayList<>();
        for (int c : options.concurrency()) {
            driver.prepare(c);
            levels.add(level(driver, c, options.warmup(), options.duration(), options.requestCount()));
        }
        return new BenchResult(options.targetName(), options.model(), driver.streaming(), levels);
    }

    /**
     * One request-sending strategy. An asynchronous driver's {@link #call()} must not block; a
     * {@linkplain #blocking() blocking} one is called from one thread per virtual client, which
     * waits for each answer as an application thread would.
     */
    interface Driver extends AutoCloseable {
        default void prepare(int concurrency) {
        }

        /** Completes with the response, or for a stream with its {@link StreamTimes}. */
        CompletableFuture<?> call();

        /** Whether each virtual client is a thread blocking on its request (embedded mode). */
        default boolean blocking() {
            return false;
        }

        /** Whether requests go over a stream (decoupled models). */
        default boolean streaming() {
            return false;
        }

        /** The server's cumulative statistics for the model, or null when it has none. */
        default ServerStats.@Nullable Snapshot stats() {
            return null;
        }

        @Override
        default void close() {
        }
    }

    /** When each response of one streamed request arrived ({@link System#nanoTime()}). */
    record StreamTimes(long[] arrivals) {
    }

    private static final class Run {
        final Recorder latency = new Recorder(3);
        final Recorder firstResponse = new Recorder(3);
        final Recorder betweenResponses = new Recorder(3);
        final AtomicLong errors = new AtomicLong();
        final AtomicLong responses = new AtomicLong();
        final AtomicReference<String> firstError = new AtomicReference<>("");
        volatile boolean measuring;
        volatile boolean running = true;
        final CountDownLatch stopped;
        final CountDownLatch measured;
        final Driver driver;

        Run(Driver driver, int concurrency, long requestCount) {
            this.driver = driver;
            this.stopped = new CountDownLatch(concurrency);
            this.measured = new CountDownLatch((int) Math.min(Integer.MAX_VALUE, Math.max(1, requestCount)));
        }

        /** An asynchronous virtual client: the next request leaves from the thread that completed the last. */
        void loop() {
            while (running) {
                long t0 = System.nanoTime();
                CompletableFuture<?> f;
                try {
                    f = driver.call();
                } catch (Throwable t) {
                    f = CompletableFuture.failedFuture(t);
                }
                if (f.isDone()) {
                    record(t0, f.isCompletedExceptionally() ? null : f.getNow(null), f.isCompletedExceptionally() ? exception(f) : null);
                    continue;
                }
                f.whenComplete((r, e) -> {
                    record(t0, r, e);
                    loop();
                });
                return;
            }
            stopped.countDown();
        }

        /**
         * A blocking virtual client: its own thread sends a request and waits for the answer, so
         * the latency includes waking that thread, as an application calling {@code get()} sees it.
         */
        void block() {
            try {
                while (running) {
                    long t0 = System.nanoTime();
                    Object result = null;
                    Throwable error = null;
                    try {
                        result = driver.call().get();
                    } catch (ExecutionException e) {
                        error = e.getCause() != null ? e.getCause() : e;
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return;
                    } catch (RuntimeException e) {
                        error = e;
                    }
                    record(t0, result, error);
                }
            } finally {
                stopped.countDown();
            }
        }

        private static Throwable exception(CompletableFuture<?> f) {
            try {
                f.join();
                return new IllegalStateException("not failed");
            } catch (RuntimeException e) {
                return e.getCause() != null ? e.getCause() : e;
            }
        }

        void record(long t0, @Nullable Object result, @Nullable Throwable e) {
            long end = System.nanoTime();
            if (!measuring) {
                return;
            }
            measured.countDown();
            if (e == null) {
                latency.recordValue(Math.max(1, end - t0));
                if (result instanceof StreamTimes st && st.arrivals().length > 0) {
                    long previous = st.arrivals()[0];
                    firstResponse.recordValue(Math.max(1, previous - t0));
                    for (int i = 1; i < st.arrivals().length; i++) {
                        betweenResponses.recordValue(Math.max(1, st.arrivals()[i] - previous));
                        previous = st.arrivals()[i];
                    }
                    responses.addAndGet(st.arrivals().length);
                }
            } else {
                errors.incrementAndGet();
                Throwable c = e.getCause() != null && e instanceof java.util.concurrent.CompletionException ? e.getCause() : e;
                firstError.compareAndSet("", describe(c));
            }
        }
    }

    private static BenchResult.Level level(Driver driver, int concurrency, Duration warmup, Duration duration, long requestCount)
            throws InterruptedException {
        Run run = new Run(driver, concurrency, requestCount);
        for (int i = 0; i < concurrency; i++) {
            if (driver.blocking()) {
                Thread.ofPlatform().name("bench-client-" + i).daemon(true).start(run::block);
            } else {
                run.loop();
            }
        }
        Thread.sleep(warmup.toMillis());
        ServerStats.Snapshot before = driver.stats();
        run.latency.reset();
        run.firstResponse.reset();
        run.betweenResponses.reset();
        run.measuring = true;
        long start = System.nanoTime();
        if (requestCount > 0) {
            run.measured.await(duration.toMillis(), TimeUnit.MILLISECONDS); // N requests, or the duration as a limit
        } else {
            Thread.sleep(duration.toMillis());
        }
        run.measuring = false;
        double seconds = (System.nanoTime() - start) / 1e9;
        ServerStats.Snapshot after = before == null ? null : driver.stats();
        run.running = false;
        if (!run.stopped.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("requests still outstanding 60 s after the level ended");
        }
        // every client has stopped: a request that ended in the window is in all the figures, or in none
        Histogram h = run.latency.getIntervalHistogram();
        Histogram first = run.firstResponse.getIntervalHistogram();
        Histogram between = run.betweenResponses.getIntervalHistogram();
        long ok = h.getTotalCount();
        double[] server = ServerStats.perRequestMicros(before, after);
        return new BenchResult.Level(concurrency, ok, run.errors.get(), seconds, ok / seconds, micros(h, 50), micros(h, 90), micros(h, 95),
                micros(h, 99), h.getTotalCount() == 0 ? Double.NaN : h.getMean() / 1e3, micros(first, 50), micros(first, 99), micros(between, 50),
                micros(between, 99), run.responses.get(), server[0], server[1], run.firstError.get());
    }

    private static double micros(Histogram h, double percentile) {
        return h.getTotalCount() == 0 ? Double.NaN : h.getValueAtPercentile(percentile) / 1e3;
    }

    /** An error as a user reads it: the cause's message, with the exception's simple name only when it has none. */
    static String describe(Throwable t) {
        if (t instanceof java.net.ConnectException) {
            return "connection refused" + (t.getMessage() == null || t.getMessage().isBlank() ? "" : ": " + t.getMessage());
        }
        String m = t.getMessage();
        return m == null || m.isBlank() ? t.getClass().getSimpleName() : m;
    }

    /** The error for a server that cannot be reached, saying what to check. */
    static IllegalStateException unreachable(String target, Throwable cause) {
        return new IllegalStateException("cannot reach " + target + " (" + describe(cause) + "). Is a server running there? Start one with "
                + "'backplane serve', or give the --url (REST) or --grpc (host:port) it serves on.", cause);
    }

    /** One input as the bench sends it. */
    private record Input(String name, DataType type, long[] shape) {
        long elements() {
            return Tensor.elementCount(name, shape);
        }

        byte[] zeros() {
            if (type == DataType.BYTES) {
                ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(5 * elements())).order(ByteOrder.LITTLE_ENDIAN);
                for (long i = 0; i < elements(); i++) {
                    b.putInt(1).put((byte) 'x');
                }
                return b.array();
            }
            return new byte[Math.toIntExact(elements() * type.byteSize())];
        }
    }

    private static List<Input> inputs(List<ModelMetadata.TensorMetadata> meta, BenchOptions o) {
        List<Input> out = new ArrayList<>();
        for (ModelMetadata.TensorMetadata t : meta) {
            DataType type = o.inputDatatype() != null ? DataType.fromProtocolName(o.inputDatatype()) : t.datatype();
            long[] shape = o.inputShape() != null ? o.inputShape().stream().mapToLong(Long::longValue).toArray()
                    : t.shape().stream().mapToLong(d -> d < 0 ? 1 : d).toArray();
            out.add(new Input(t.name(), type, shape));
        }
        return out;
    }

    /** The embedded host, called as a Java application calls it: one blocking thread per virtual client. */
    private static final class EmbeddedDriver implements Driver {
        private final InferenceService service;
        private final InferenceRequest request;
        private final boolean decoupled;

        EmbeddedDriver(InferenceService service, BenchOptions o) {
            this.service = service;
            ModelMetadata md = service.metadata(o.model(), o.version());
            this.decoupled = service.modelConfig(o.model(), o.version()).decoupled();
            InferenceRequest.Builder b = InferenceRequest.builder(o.model());
            if (o.version() > 0) {
                b.version(o.version());
            }
            for (Input in : inputs(md.inputs(), o)) {
                b.input(Tensor.of(in.name(), in.type(), in.shape(), MemorySegment.ofArray(in.zeros())));
            }
            this.request = b.build();
        }

        @Override
        public boolean blocking() {
            return true;
        }

        @Override
        public boolean streaming() {
            return decoupled;
        }

        @Override
        public CompletableFuture<?> call() {
            if (!decoupled) {
                return service.infer(request);
            }
            CompletableFuture<StreamTimes> f = new CompletableFuture<>();
            List<Long> arrivals = new ArrayList<>();
            service.stream(request, new ResponseObserver() {
                @Override
                public void onResponse(InferenceResponse response) {
                    synchronized (arrivals) {
                        arrivals.add(System.nanoTime());
                    }
                }

                @Override
                public void onComplete() {
                    synchronized (arrivals) {
                        f.complete(new StreamTimes(arrivals.stream().mapToLong(Long::longValue).toArray()));
                    }
                }

                @Override
                public void onError(BackplaneException error) {
                    f.completeExceptionally(error);
                }
            });
            return f;
        }
    }

    private static final class GrpcDriver implements Driver {
        private final BenchOptions options;
        private final List<ManagedChannel> channels = new ArrayList<>();
        /** ModelInfer with responses parsed once, their raw outputs views of the message rather than copies (AliasingMarshaller). */
        private static final MethodDescriptor<ModelInferRequest, ModelInferResponse> INFER = AliasingMarshaller.of(GRPCInferenceServiceGrpc.getModelInferMethod());
        private List<ManagedChannel> clients = List.of();
        private final ModelInferRequest request;
        private final AtomicLong next = new AtomicLong();

        GrpcDriver(BenchOptions o) {
            this.options = o;
            ManagedChannel first = channel();
            channels.add(first);
            ModelMetadataResponse md;
            try {
                md = GRPCInferenceServiceGrpc.newBlockingStub(first).withDeadlineAfter(30, TimeUnit.SECONDS).modelMetadata(
                        ModelMetadataRequest.newBuilder().setName(o.model()).setVersion(o.version() > 0 ? Long.toString(o.version()) : "").build());
            } catch (RuntimeException e) {
                first.shutdownNow();
                if (String.valueOf(e.getMessage()).startsWith("UNAVAILABLE")) {
                    throw unreachable("the gRPC server at " + o.grpc(), e);
                }
                throw new IllegalStateException("model metadata of '" + o.model() + "' from gRPC " + o.grpc() + " failed: " + describe(e), e);
            }
            List<ModelMetadata.TensorMetadata> meta = md.getInputsList().stream().map(t -> new ModelMetadata.TensorMetadata(t.getName(),
                    DataType.fromProtocolName(t.getDatatype()), t.getShapeList())).toList();
            ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName(o.model())
                    .setModelVersion(o.version() > 0 ? Long.toString(o.version()) : "");
            for (Input in : inputs(meta, o)) {
                ModelInferRequest.InferInputTensor.Builder t = b.addInputsBuilder().setName(in.name()).setDatatype(in.type().protocolName());
                Arrays.stream(in.shape()).forEach(t::addShape);
                b.addRawInputContents(ByteString.copyFrom(in.zeros()));
            }
            this.request = b.build();
        }

        private ManagedChannel channel() {
            // Direct executor: responses are handled on the channel's event loop, one thread hop less per request. A 16 MiB
            // flow-control window (grpc-java's default is 1 MiB) lets a large response arrive without waiting for window updates; no
            // retries, so no retry buffer holds each request.
            return NettyChannelBuilder.forTarget(options.grpc(), InsecureChannelCredentials.create()).maxInboundMessageSize(Integer.MAX_VALUE)
                    .flowControlWindow(16 << 20).disableRetry().directExecutor().build();
        }

        @Override
        public void prepare(int concurrency) {
            int want = options.connections() > 0 ? options.connections() : Math.min(concurrency, Runtime.getRuntime().availableProcessors());
            while (channels.size() < want) {
                channels.add(channel());
            }
            clients = List.copyOf(channels.subList(0, want));
        }

        @Override
        public CompletableFuture<?> call() {
            CompletableFuture<ModelInferResponse> f = new CompletableFuture<>();
            ManagedChannel c = clients.get((int) (next.getAndIncrement() % clients.size()));
            ClientCalls.asyncUnaryCall(c.newCall(INFER, CallOptions.DEFAULT), request, new StreamObserver<>() {
                @Override
                public void onNext(ModelInferResponse value) {
                    f.complete(value);
                }

                @Override
                public void onError(Throwable t) {
                    f.completeExceptionally(t);
                }

                @Override
                public void onCompleted() {
                    f.complete(null);
                }
            });
            return f;
        }

        @Override
        public void close() {
            for (ManagedChannel ch : channels) {
                ch.shutdownNow();
            }
            for (ManagedChannel ch : channels) {
                try {
                    ch.awaitTermination(5, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /**
     * REST over Netty: one keep-alive connection per virtual client, one request in flight per
     * connection, everything on the client's event loop (no thread hop per request), so the
     * client adds little to what is measured.
     */
    private static final class RestDriver implements Driver {
        private final EventLoopGroup group = new MultiThreadIoEventLoopGroup(Math.max(1, Runtime.getRuntime().availableProcessors() / 2),
                new DefaultThreadFactory("bench-rest-client", true), NioIoHandler.newFactory());
        private final java.util.concurrent.ConcurrentLinkedQueue<Connection> idle = new java.util.concurrent.ConcurrentLinkedQueue<>();
        private final List<Connection> all = java.util.Collections.synchronizedList(new ArrayList<>());
        private final String host;
        private final int port;
        private final String path;
        private final byte[] body;
        private final int headerLength;

        RestDriver(BenchOptions o) throws IOException, InterruptedException {
            URI base = URI.create(o.url().endsWith("/") ? o.url().substring(0, o.url().length() - 1) : o.url());
            host = base.getHost();
            port = base.getPort() > 0 ? base.getPort() : 80;
            String modelPath = base.getPath() + "/v2/models/" + o.model() + (o.version() > 0 ? "/versions/" + o.version() : "");
            String md;
            try (HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build()) {
                HttpResponse<String> r;
                try {
                    r = client.send(HttpRequest.newBuilder(base.resolve(modelPath)).GET().build(), HttpResponse.BodyHandlers.ofString());
                } catch (java.net.ConnectException e) {
                    throw unreachable(base.toString(), e);
                }
                if (r.statusCode() != 200) {
                    throw new IllegalStateException("model metadata from " + base.resolve(modelPath) + " failed: " + r.statusCode() + " " + r.body());
                }
                md = r.body();
            }
            List<ModelMetadata.TensorMetadata> meta = new ArrayList<>();
            for (JsonNode t : JSON.readTree(md).get("inputs")) {
                List<Long> shape = new ArrayList<>();
                t.get("shape").forEach(d -> shape.add(d.asLong()));
                meta.add(new ModelMetadata.TensorMetadata(t.get("name").asText(), DataType.fromProtocolName(t.get("datatype").asText()), shape));
            }
            StringBuilder header = new StringBuilder("{\"parameters\":{\"binary_data_output\":true},\"inputs\":[");
            ByteArrayOutputStream binary = new ByteArrayOutputStream();
            List<Input> inputs = inputs(meta, o);
            for (int i = 0; i < inputs.size(); i++) {
                Input in = inputs.get(i);
                byte[] z = in.zeros();
                header.append(i > 0 ? "," : "").append("{\"name\":\"").append(in.name()).append("\",\"datatype\":\"")
                        .append(in.type().protocolName()).append("\",\"shape\":").append(Arrays.toString(in.shape()).replace(" ", ""))
                        .append(",\"parameters\":{\"binary_data_size\":").append(z.length).append("}}");
                binary.writeBytes(z);
            }
            header.append("]}");
            byte[] h = header.toString().getBytes(StandardCharsets.UTF_8);
            headerLength = h.length;
            body = Arrays.copyOf(h, h.length + binary.size());
            System.arraycopy(binary.toByteArray(), 0, body, h.length, binary.size());
            path = modelPath + "/infer";
            statsClient = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build();
            statsUri = base.resolve(modelPath.replaceFirst("/versions/\\d+$", "") + "/stats");
        }

        private final HttpClient statsClient;
        private final URI statsUri;

        @Override
        public ServerStats.@Nullable Snapshot stats() {
            return ServerStats.fetch(statsClient, statsUri);
        }

        private final class Connection extends SimpleChannelInboundHandler<FullHttpResponse> {
            volatile @Nullable CompletableFuture<Object> pending;
            @Nullable Channel channel;

            @Override
            protected void channelRead0(ChannelHandlerContext ctx, FullHttpResponse r) {
                CompletableFuture<Object> f = pending;
                pending = null;
                idle.add(this);
                if (f == null) {
                    return;
                }
                if (r.status().code() != 200) {
                    f.completeExceptionally(new IllegalStateException("HTTP " + r.status() + ": " + r.content().toString(StandardCharsets.UTF_8)));
                } else {
                    f.complete(r.status());
                }
            }

            @Override
            public void channelInactive(ChannelHandlerContext ctx) {
                all.remove(this);
                idle.remove(this);
                CompletableFuture<Object> f = pending;
                if (f != null) {
                    f.completeExceptionally(new IOException("connection closed by the server"));
                }
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                ctx.close();
            }
        }

        private Connection connect() {
            Connection c = new Connection();
            c.channel = new Bootstrap().group(group).channel(NioSocketChannel.class).option(ChannelOption.TCP_NODELAY, true)
                    .handler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new HttpClientCodec(), new HttpObjectAggregator(Integer.MAX_VALUE), c);
                        }
                    }).connect(host, port).syncUninterruptibly().channel();
            all.add(c);
            return c;
        }

        @Override
        public void prepare(int concurrency) {
            while (all.size() < concurrency) {
                idle.add(connect());
            }
        }

        @Override
        public CompletableFuture<?> call() {
            Connection c = idle.poll();
            if (c == null) {
                c = connect();
            }
            CompletableFuture<Object> f = new CompletableFuture<>();
            c.pending = f;
            FullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, path, Unpooled.wrappedBuffer(body));
            req.headers().set(HttpHeaderNames.HOST, host).set(HttpHeaderNames.CONTENT_LENGTH, body.length)
                    .set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_OCTET_STREAM)
                    .set("Inference-Header-Content-Length", headerLength);
            java.util.Objects.requireNonNull(c.channel).writeAndFlush(req);
            return f;
        }

        @Override
        public void close() {
            for (Connection c : new ArrayList<>(all)) {
                if (c.channel != null) {
                    c.channel.close().syncUninterruptibly();
                }
            }
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
            statsClient.close();
        }
    }

    /** Parses a command line into options (for tests and programs); {@link #main} also takes the output options. */
    public static BenchOptions parse(String... args) {
        BenchOptions o = BenchCli.parse(args).options();
        if (o == null) {
            throw new IllegalArgumentException("--openai-url runs the generation mode: parse it with BenchCli, run it with OpenAiBench");
        }
        return o;
    }

    /** Runs the command line: exit status 0, 1 when errors passed {@code --max-error-rate} or the run failed, 2 for bad options. */
    public static void main(String[] args) {
        int status = BenchCli.execute(args, new java.io.PrintWriter(System.out, true, StandardCharsets.UTF_8),
                new java.io.PrintWriter(System.err, true, StandardCharsets.UTF_8));
        if (status != 0) {
            System.exit(status);
        }
    }
}
