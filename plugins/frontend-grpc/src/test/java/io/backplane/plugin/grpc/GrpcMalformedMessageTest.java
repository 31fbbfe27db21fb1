package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.CancelBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelMetadataRequest;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.HostListener.Outcome;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.metrics.MetricFamilySnapshot;
import io.backplane.spi.metrics.MetricRegistry;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Messages that do not parse, sent with a raw byte client to every method of
 * {@code inference.GRPCInferenceService}, through the real server: random bytes, a truncated
 * ModelInferRequest, length prefixes that lie, a model name that is not UTF-8, and (parsed, but
 * not servable) a shape of 10 × 2^31. Each answers INVALID_ARGUMENT saying what was wrong, is
 * counted in {@value MalformedMessages#METRIC}, and is logged at WARN once per connection without
 * a stack trace; a stream with a request in flight ends and cancels it; the server then serves.
 */
class GrpcMalformedMessageTest {
    CancelBackend backend;
    CancelBackend.Outcomes outcomes;
    BackplaneHost host;
    GrpcFrontend frontend;
    final List<ManagedChannel> channels = new ArrayList<>();

    final ListAppender<ILoggingEvent> appender = new ListAppender<>();
    final ch.qos.logback.classic.Logger root = (ch.qos.logback.classic.Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    /** What grpc-java logs through java.util.logging at WARNING or above (its SEVERE "Exception while executing runnable"). */
    final List<LogRecord> julRecords = new java.util.concurrent.CopyOnWriteArrayList<>();
    final java.util.logging.Logger grpcJul = java.util.logging.Logger.getLogger("io.grpc");
    final Handler julHandler = new Handler() {
        @Override
        public void publish(LogRecord r) {
            if (r.getLevel().intValue() >= java.util.logging.Level.WARNING.intValue()) {
                julRecords.add(r);
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    /** Malformed messages sent, per bare method name. */
    final Map<String, Integer> sent = new TreeMap<>();

    @BeforeEach
    void start() throws Exception {
        appender.start();
        root.addAppender(appender);
        grpcJul.addHandler(julHandler);
        backend = new CancelBackend();
        outcomes = new CancelBackend.Outcomes();
        host = backend.host(outcomes);
        FrontendContext base = TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0"));
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(new FrontendContext() {
            @Override
            public InferenceService service() {
                return base.service();
            }

            @Override
            public Map<String, String> options() {
                return base.options();
            }

            @Override
            public MetricRegistry metrics() {
                return host.frontendMetrics("frontend 'grpc'");
            }
        });
        frontend.start();
    }

    @AfterEach
    void stop() throws Exception {
        try {
            backend.release.countDown();
            for (ManagedChannel c : channels) {
                c.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            frontend.close();
            assertEquals(List.of(), families(), "the frontend's metric family went with it");
            host.close();
            TestSupport.assertNoBackplaneThreads();
            assertEquals(List.of(), backend.problems);
        } finally {
            root.detachAppender(appender);
            grpcJul.removeHandler(julHandler);
        }
    }

    @Test
    void malformedMessages_everyMethod_invalidArgumentSayingWhy_countedOnceWarnedPerConnection_thenServes() throws Exception {
        ManagedChannel first = channel();
        Random random = new Random(34);
        for (MethodDescriptor<?, ?> m : GRPCInferenceServiceGrpc.getServiceDescriptor().getMethods()) {
            byte[] junk = new byte[64];
            random.nextBytes(junk);
            junk[0] = 0x0F; // field 1 with wire type 7, which does not exist: no message type can parse it
            Status s = send(first, m, junk);
            assertMalformed(s, m, "invalid wire type");
        }

        ModelInferRequest valid = GrpcCancellationTest.waitRequest(7);
        byte[] whole = valid.toByteArray();
        assertMalformed(send(first, GRPCInferenceServiceGrpc.getModelInferMethod(), Arrays.copyOf(whole, whole.length / 2)),
                GRPCInferenceServiceGrpc.getModelInferMethod(), "input ended unexpectedly");

        // model_name (field 1) claims 100 bytes; 5 follow
        byte[] longer = concat(new byte[] {0x0A, 100}, "hello".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        assertMalformed(send(first, GRPCInferenceServiceGrpc.getModelInferMethod(), longer), GRPCInferenceServiceGrpc.getModelInferMethod(),
                "input ended unexpectedly");
        // model_name claims a negative size (a ten-byte varint of -1)
        byte[] negative = {0x0A, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF,
            (byte) 0xFF, 0x01};
        assertMalformed(send(first, GRPCInferenceServiceGrpc.getModelInferMethod(), negative), GRPCInferenceServiceGrpc.getModelInferMethod(),
                "negative size");

        // a string that is not UTF-8 (0xC3 0x28) in the model name, on three methods
        byte[] notUtf8 = {(byte) 0xC3, 0x28};
        assertMalformed(send(first, GRPCInferenceServiceGrpc.getModelInferMethod(), field(ModelInferRequest.MODEL_NAME_FIELD_NUMBER, notUtf8)),
                GRPCInferenceServiceGrpc.getModelInferMethod(), "invalid UTF-8");
        assertMalformed(send(first, GRPCInferenceServiceGrpc.getModelMetadataMethod(), field(ModelMetadataRequest.NAME_FIELD_NUMBER, notUtf8)),
                GRPCInferenceServiceGrpc.getModelMetadataMethod(), "invalid UTF-8");
        assertMalformed(send(first, GRPCInferenceServiceGrpc.getRepositoryModelLoadMethod(),
                field(RepositoryModelLoadRequest.MODEL_NAME_FIELD_NUMBER, notUtf8)), GRPCInferenceServiceGrpc.getRepositoryModelLoadMethod(),
                "invalid UTF-8");
        // and inside a stream, after nothing else
        assertMalformed(stream(first, null, field(ModelInferRequest.MODEL_NAME_FIELD_NUMBER, notUtf8)), GRPCInferenceServiceGrpc.getModelStreamInferMethod(),
                "invalid UTF-8");

        List<ILoggingEvent> warned = warnings();
        assertEquals(1, warned.size(), "one WARN for the one connection: " + warned);
        String line = warned.getFirst().getFormattedMessage();
        assertTrue(line.contains("127.0.0.1") && line.contains("invalid wire type"), line);

        // a second connection gets its own WARN line
        ManagedChannel second = channel();
        assertMalformed(send(second, GRPCInferenceServiceGrpc.getServerLiveMethod(), new byte[] {0x00}), GRPCInferenceServiceGrpc.getServerLiveMethod(),
                "invalid tag (zero)");
        assertEquals(2, warnings().size(), "a new connection warns once more: " + warnings());

        for (ILoggingEvent e : appender.list) {
            assertTrue(e.getThrowableProxy() == null || !e.getLevel().isGreaterOrEqual(Level.WARN), "a stack trace at " + e.getLevel() + ": " + e);
        }
        assertEquals(List.of(), julRecords.stream().map(r -> r.getLevel() + " " + r.getMessage() + " " + r.getThrown()).toList(),
                "grpc-java logged nothing at WARNING or SEVERE");

        Map<String, Double> counted = new TreeMap<>();
        for (MetricFamilySnapshot f : families()) {
            assertEquals(io.backplane.spi.metrics.MetricKind.COUNTER, f.kind());
            for (MetricFamilySnapshot.Series s : f.series()) {
                if (s.value() > 0) {
                    counted.put(s.labels().get("method"), s.value());
                }
            }
            assertEquals(GRPCInferenceServiceGrpc.getServiceDescriptor().getMethods().size(), f.series().size(), "a series per method");
        }
        Map<String, Double> expected = new TreeMap<>();
        sent.forEach((k, v) -> expected.put(k, v.doubleValue()));
        assertEquals(expected, counted);

        // the server serves on, on both connections
        backend.release.countDown();
        assertEquals("OUT0", GRPCInferenceServiceGrpc.newBlockingStub(first).withDeadlineAfter(30, TimeUnit.SECONDS).modelInfer(valid)
                .getOutputs(0).getName());
        assertEquals("OUT0", GRPCInferenceServiceGrpc.newBlockingStub(second).withDeadlineAfter(30, TimeUnit.SECONDS).modelInfer(valid)
                .getOutputs(0).getName());
    }

    /** R2: a malformed message in a stream ends the stream with INVALID_ARGUMENT and cancels the request the stream has in flight. */
    @Test
    void modelStreamInfer_malformedAfterARequestInFlight_invalidArgument_requestCancelled_thenServes() throws Exception {
        ManagedChannel c = channel();
        Status s = stream(c, GrpcCancellationTest.waitRequest(1).toByteArray(), new byte[] {0x0A, 100, 0x41});
        assertMalformed(s, GRPCInferenceServiceGrpc.getModelStreamInferMethod(), "input ended unexpectedly");
        assertNotNull(backend.cancelled.poll(30, TimeUnit.SECONDS), "the model did not see its request cancelled");
        assertEquals(new CancelBackend.Outcomes.Ended("wait", Outcome.CANCELED, true), outcomes.next());

        backend.release.countDown();
        assertEquals("OUT0", GRPCInferenceServiceGrpc.newBlockingStub(c).withDeadlineAfter(30, TimeUnit.SECONDS)
                .modelInfer(GrpcCancellationTest.waitRequest(2)).getOutputs(0).getName());
    }

    /** A shape whose element count overflows a long: INVALID_ARGUMENT naming the input and the shape, not "long overflow". */
    @Test
    void modelInfer_shapeOfTenTimesTwoToThe31_invalidArgumentNamingTheInput() {
        var stub = GRPCInferenceServiceGrpc.newBlockingStub(channel()).withDeadlineAfter(30, TimeUnit.SECONDS);
        for (boolean raw : new boolean[] {true, false}) {
            var in = ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32");
            for (int i = 0; i < 10; i++) {
                in.addShape(1L << 31);
            }
            var req = ModelInferRequest.newBuilder().setModelName("wait");
            if (raw) {
                req.addInputs(in).addRawInputContents(ByteString.copyFrom(new byte[4]));
            } else {
                req.addInputs(in.setContents(InferTensorContents.newBuilder().addFp32Contents(1)));
            }
            StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class, () -> stub.modelInfer(req.build()));
            assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), e.getStatus().toString());
            String d = String.valueOf(e.getStatus().getDescription());
            assertTrue(d.contains("'IN0'") && d.contains("[2147483648, 2147483648") && d.contains("more than 2^63-1 elements"), d);
        }
        assertEquals(0, host.openRequests());
    }

    // ---- helpers ----

    private ManagedChannel channel() {
        ManagedChannel c = Grpc.newChannelBuilderForAddress("127.0.0.1", frontend.port(), InsecureChannelCredentials.create()).build();
        channels.add(c);
        return c;
    }

    private List<ILoggingEvent> warnings() {
        return appender.list.stream().filter(e -> e.getLoggerName().equals(MalformedMessages.class.getName()) && e.getLevel() == Level.WARN).toList();
    }

    private List<MetricFamilySnapshot> families() {
        return host.customMetrics().stream().filter(f -> f.name().equals(MalformedMessages.METRIC)).toList();
    }

    private void assertMalformed(Status s, MethodDescriptor<?, ?> m, String reason) {
        assertEquals(Status.Code.INVALID_ARGUMENT, s.getCode(), m.getBareMethodName() + ": " + s);
        String d = String.valueOf(s.getDescription());
        String type = m.getFullMethodName().equals(GRPCInferenceServiceGrpc.getModelStreamInferMethod().getFullMethodName()) ? "ModelInferRequest"
                : m.getBareMethodName() + "Request";
        assertTrue(d.startsWith("the " + type + " message could not be parsed: ") && d.contains(reason) && d.endsWith("send a valid inference." + type),
                m.getBareMethodName() + ": " + d);
        sent.merge(m.getBareMethodName(), 1, Integer::sum);
    }

    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };

    private static MethodDescriptor<byte[], byte[]> raw(MethodDescriptor<?, ?> m) {
        return MethodDescriptor.<byte[], byte[]>newBuilder(BYTES, BYTES).setType(m.getType()).setFullMethodName(m.getFullMethodName()).build();
    }

    /** One unary call (or a stream with one message) carrying {@code body}; its status. */
    private Status send(Channel c, MethodDescriptor<?, ?> m, byte[] body) throws Exception {
        if (m.getType() == MethodDescriptor.MethodType.BIDI_STREAMING) {
            return stream(c, null, body);
        }
        try {
            ClientCalls.blockingUnaryCall(c, raw(m), CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), body);
            return Status.OK;
        } catch (StatusRuntimeException e) {
            return e.getStatus();
        }
    }

    /**
     * A ModelStreamInfer stream that sends {@code first} (when not null) and waits until it
     * reached the model, then sends {@code malformed} without half-closing; the stream's status.
     */
    private Status stream(Channel c, byte @Nullable [] first, byte[] malformed) throws Exception {
        CompletableFuture<Status> end = new CompletableFuture<>();
        StreamObserver<byte[]> requests = ClientCalls.asyncBidiStreamingCall(
                c.newCall(raw(GRPCInferenceServiceGrpc.getModelStreamInferMethod()), CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS)),
                new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                    }

                    @Override
                    public void onError(Throwable t) {
                        end.complete(Status.fromThrowable(t));
                    }

                    @Override
                    public void onCompleted() {
                        end.complete(Status.OK);
                    }
                });
        if (first != null) {
            requests.onNext(first);
            assertNotNull(backend.started.poll(30, TimeUnit.SECONDS), "the stream's first request did not reach the model");
        }
        requests.onNext(malformed);
        return end.get(30, TimeUnit.SECONDS);
    }

    private static byte[] field(int number, byte[] value) {
        return concat(new byte[] {(byte) (number << 3 | 2), (byte) value.length}, value);
    }

    private static byte[] concat(byte[] a, byte[] b) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(a);
        out.writeBytes(b);
        return out.toByteArray();
    }
}
