package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.host.Frontend;
import io.backplane.testkit.Await;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * DESIGN P9 end to end: a slow client slows a decoupled python model through the stub's response
 * credits. The model sends {@value #N} responses of 64 KiB and appends each index to a progress
 * file before it sends it; a gRPC client reads one message at a time (manual flow control). At
 * every message k the model may be ahead by at most the stub's credits plus transport slack
 * ({@value #BOUND}); without flow control it would run to the end at once while the frontend
 * buffers everything.
 */
class PythonFlowControlTest {
    private static final Logger log = LoggerFactory.getLogger(PythonFlowControlTest.class);
    static final int N = 600;
    static final int CREDITS = Wire.RESPONSE_CREDITS;
    /**
     * Credits, plus what the transport holds: the server call's buffer under its on-ready threshold,
     * the client's 1 MiB HTTP/2 window (16 responses), the kernel's socket buffers (REST), one
     * index written before its send blocks. Runs on an idle machine measured 80 to 82 ahead, 79 to
     * 94 with two busy-loops beside the build on 2 cores, and one CI run on a loaded 2-core machine
     * 115; the transport's share varies with scheduling, so the bound allows it as much again as
     * the credits. A model without flow control runs far past it (to {@value #N}), which is what
     * this test exists to catch.
     */
    static final int BOUND = 2 * CREDITS + 32;

    @TempDir
    Path temp;

    @BeforeAll
    static void python() throws Exception {
        PythonApiTest.python();
    }

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    /**
     * The client stops reading after the first message until the model has spent every credit,
     * then gives the model a further second to overrun the bound (a window for a violation to
     * show, not a duration the passing run relies on), then reads the rest one by one, checking
     * the bound at each message. All {@value #N} arrive in order, then one empty final response,
     * then the end of the stream, once.
     */
    @Test
    void grpcStream_slowClient_holdsTheModelWithinItsCredits() throws Exception {
        Path progress = temp.resolve("flood-1");
        Path repo = repository();
        try (BackplaneHost host = host(repo);
                Frontend f = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            ManagedChannel channel = channel(f);
            try {
                SlowReader reader = new SlowReader();
                var requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS).modelStreamInfer(reader);
                requests.onNext(flood("flood-1"));
                requests.onCompleted();

                int maxAhead = 0;
                for (int k = 0; k < N; k++) {
                    ModelStreamInferResponse m = reader.messages.poll(60, TimeUnit.SECONDS);
                    assertNotNull(m, "message " + k + " did not arrive");
                    assertEquals("", m.getErrorMessage(), "message " + k);
                    ModelInferResponse r = m.getInferResponse();
                    int index = ByteBuffer.wrap(r.getRawOutputContents(1).toByteArray()).order(ByteOrder.LITTLE_ENDIAN).getInt();
                    assertEquals(k, index, "responses arrive in order");
                    assertEquals(65536, r.getRawOutputContents(0).size());
                    assertEquals((byte) (k % 251), r.getRawOutputContents(0).byteAt(65535));
                    if (k == 0) {
                        awaitCreditsSpentThenWatch(progress, k);
                    }
                    int ahead = sent(progress) - k;
                    maxAhead = Math.max(maxAhead, ahead);
                    assertTrue(ahead <= BOUND, "at message " + k + " the model had written " + (k + ahead) + " responses: " + ahead
                            + " ahead of the client, more than " + CREDITS + " credits + transport slack (" + BOUND + ")");
                    reader.call.request(1);
                }
                ModelStreamInferResponse last = reader.messages.poll(60, TimeUnit.SECONDS);
                assertNotNull(last, "the empty final response did not arrive");
                assertTrue(last.getInferResponse().getParametersMap().get("triton_final_response").getBoolParam(), last.toString());
                assertEquals(0, last.getInferResponse().getRawOutputContentsCount(), last.toString());
                reader.call.request(1);
                Await.until(() -> reader.completed.get() + reader.errors.get() > 0, Duration.ofSeconds(60), "the end of the stream");
                assertEquals(1, reader.completed.get(), "the stream ends once, normally");
                assertEquals(0, reader.errors.get());
                assertTrue(reader.messages.isEmpty(), "nothing after the final response: " + reader.messages);
                assertEquals(N, sent(progress));
                log.info("flow control: the model ran at most {} responses ahead of the client (bound {})", maxAhead, BOUND);
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }

    /**
     * The same over REST {@code generate_stream} (server-sent events), read slowly through a raw
     * socket with a small receive buffer. Each event is the 64 KiB tensor as JSON (about 200 KiB),
     * so the kernel's socket buffers hold only a few of them and the bound still means something.
     */
    @Test
    void restEventStream_slowClient_holdsTheModelWithinItsCredits() throws Exception {
        Path progress = temp.resolve("progress");
        Path repo = repository();
        try (BackplaneHost host = host(repo);
                Frontend f = host.frontendFactories().get("http").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            URI endpoint = URI.create(f.endpoint());
            try (Socket socket = new Socket()) {
                socket.setReceiveBufferSize(64 * 1024);
                socket.setSoTimeout(60_000);
                socket.connect(new InetSocketAddress("127.0.0.1", endpoint.getPort()));
                byte[] body = ("{\"N\":" + N + "}").getBytes(StandardCharsets.US_ASCII);
                OutputStream out = socket.getOutputStream();
                out.write(("POST /v2/models/flood/generate_stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        + "Content-Length: " + body.length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                out.write(body);
                out.flush();
                EventReader events = new EventReader(new BufferedInputStream(socket.getInputStream(), 8192));
                String status = events.head();
                assertTrue(status.startsWith("HTTP/1.1 200"), status);
                int maxAhead = 0;
                for (int k = 0; k < N; k++) {
                    String event = events.next();
                    assertNotNull(event, "event " + k + " did not arrive");
                    assertTrue(event.startsWith("data: "), event.length() > 200 ? event.substring(0, 200) : event);
                    JsonNode json = StubJson.MAPPER.readTree(event.substring(6));
                    assertEquals(k, json.get("INDEX").asInt(), "events arrive in order");
                    assertEquals(65536, json.get("OUT").size());
                    if (k == 0) {
                        awaitCreditsSpentThenWatch(progress, k);
                    }
                    int ahead = sent(progress) - k;
                    maxAhead = Math.max(maxAhead, ahead);
                    assertTrue(ahead <= BOUND, "at event " + k + " the model had written " + (k + ahead) + " responses: " + ahead
                            + " ahead of the client, more than " + CREDITS + " credits + transport slack (" + BOUND + ")");
                }
                assertEquals(null, events.next(), "the stream ends after the last event");
                assertEquals(N, sent(progress));
                log.info("flow control (REST): the model ran at most {} responses ahead of the client (bound {})", maxAhead, BOUND);
            }
        }
    }

    /**
     * Waits until the model has spent its credits (a handshake: with flow control it cannot get
     * further), then leaves it one more second to overrun the bound: a window for a violation to
     * show, not a duration a passing run relies on.
     */
    private static void awaitCreditsSpentThenWatch(Path progress, int k) {
        int spent = Math.min(N, CREDITS);
        Await.until(() -> sent(progress) >= spent, Duration.ofSeconds(60), "the model to spend its " + CREDITS + " credits");
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        while (sent(progress) - k <= BOUND && System.nanoTime() - end < 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }

    /** Reads an HTTP/1.1 chunked event stream: the status line, then one server-sent event at a time. */
    private static final class EventReader {
        private final InputStream in;
        private final StringBuilder pending = new StringBuilder();
        private boolean ended;

        EventReader(InputStream in) {
            this.in = in;
        }

        String head() throws IOException {
            String status = line();
            while (!line().isEmpty()) {
                // headers: chunked transfer encoding is what the frontend sends for an event stream
            }
            return status;
        }

        /** The next event ("data: ..."), or null at the end of the stream. */
        @org.jspecify.annotations.Nullable String next() throws IOException {
            while (true) {
                int cut = pending.indexOf("\n\n");
                if (cut >= 0) {
                    String event = pending.substring(0, cut);
                    pending.delete(0, cut + 2);
                    return event;
                }
                if (ended) {
                    return null;
                }
                int size = Integer.parseInt(line().trim(), 16);
                if (size == 0) {
                    ended = true;
                    continue;
                }
                pending.append(new String(in.readNBytes(size), StandardCharsets.UTF_8));
                line(); // the CRLF after the chunk
            }
        }

        private String line() throws IOException {
            StringBuilder b = new StringBuilder();
            int c;
            while ((c = in.read()) != '\n') {
                if (c < 0) {
                    throw new IOException("the stream ended inside a line: " + b);
                }
                if (c != '\r') {
                    b.append((char) c);
                }
            }
            return b.toString();
        }
    }

    /**
     * A client that walks away while the model waits for credits: the ACKs held for its responses
     * still go out (the stream's end completes its waiters, the request's close completes the
     * rest), so the next request on the same instance can again run a full {@value #CREDITS}
     * responses ahead of its own slow client. A lost ACK would leave the stub short of credits, and
     * the second wait below would time out.
     */
    @Test
    void grpcStream_clientCancelsWhileAcksWait_everyCreditComesBack() throws Exception {
        Path first = temp.resolve("walks-away");
        Path second = temp.resolve("comes-after");
        Path repo = repository();
        try (BackplaneHost host = host(repo);
                Frontend f = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            ManagedChannel channel = channel(f);
            try {
                SlowReader leaving = new SlowReader();
                var requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS).modelStreamInfer(leaving);
                requests.onNext(flood("walks-away"));
                assertNotNull(leaving.messages.poll(60, TimeUnit.SECONDS), "the first response");
                Await.until(() -> sent(first) >= CREDITS, Duration.ofSeconds(60), "the model to spend its credits on the first client");
                leaving.call.cancel("the client walks away", null);
                Await.until(() -> Files.exists(temp.resolve("walks-away.done")), Duration.ofSeconds(60), "the model to end the cancelled request");

                SlowReader staying = new SlowReader();
                requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS).modelStreamInfer(staying);
                requests.onNext(flood("comes-after"));
                requests.onCompleted();
                assertNotNull(staying.messages.poll(60, TimeUnit.SECONDS), "the second request's first response");
                Await.until(() -> sent(second) >= CREDITS, Duration.ofSeconds(60), "the model to get " + CREDITS
                        + " responses ahead again: every credit of the cancelled request came back");
                staying.call.request(N + 1);
                int data = 1;
                ModelStreamInferResponse m;
                while ((m = staying.messages.poll(60, TimeUnit.SECONDS)) != null
                        && !m.getInferResponse().getParametersMap().get("triton_final_response").getBoolParam()) {
                    assertEquals("", m.getErrorMessage());
                    data++;
                }
                assertNotNull(m, "the second request ended");
                assertEquals(N, data, "every response of the second request arrived");
                Await.until(() -> staying.completed.get() + staying.errors.get() > 0, Duration.ofSeconds(60), "the end of the stream");
                assertEquals(1, staying.completed.get());
                assertEquals(0, staying.errors.get());
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }

    /** A request for {@value #N} responses, with an empty final response to mark its end. */
    private static ModelInferRequest flood(String id) {
        ByteBuffer count = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(N);
        return ModelInferRequest.newBuilder().setModelName("flood").setId(id)
                .putParameters(GrpcEmptyFinal.NAME, InferParameter.newBuilder().setBoolParam(true).build())
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("N").setDatatype("INT32").addShape(1))
                .addRawInputContents(ByteString.copyFrom(count.array())).build();
    }

    /** How many indexes the model has written (each before its send). */
    private static int sent(Path progress) {
        if (!Files.exists(progress)) {
            return 0;
        }
        try {
            String s = Files.readString(progress);
            int lines = 0;
            for (int i = 0; i < s.length(); i++) {
                if (s.charAt(i) == '\n') {
                    lines++;
                }
            }
            return lines;
        } catch (IOException e) {
            throw new AssertionError("cannot read the model's progress file " + progress, e);
        }
    }

    /** Reads with manual flow control: one message, then one more per {@code request(1)}. */
    private static final class SlowReader implements ClientResponseObserver<ModelInferRequest, ModelStreamInferResponse> {
        final LinkedBlockingQueue<ModelStreamInferResponse> messages = new LinkedBlockingQueue<>();
        final AtomicInteger completed = new AtomicInteger();
        final AtomicInteger errors = new AtomicInteger();
        volatile ClientCallStreamObserver<ModelInferRequest> call;

        @Override
        public void beforeStart(ClientCallStreamObserver<ModelInferRequest> requestStream) {
            call = requestStream;
            requestStream.disableAutoRequestWithInitial(1);
        }

        @Override
        public void onNext(ModelStreamInferResponse value) {
            messages.add(value);
        }

        @Override
        public void onError(Throwable t) {
            errors.incrementAndGet();
        }

        @Override
        public void onCompleted() {
            completed.incrementAndGet();
        }
    }

    private static final class GrpcEmptyFinal {
        static final String NAME = "triton_enable_empty_final_response";
    }

    private Path repository() throws IOException {
        Path model = Files.createDirectories(temp.resolve("repo/flood/1"));
        Files.writeString(model.getParent().resolve("config.pbtxt"), """
                name: "flood"
                backend: "python"
                model_transaction_policy { decoupled: true }
                input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_UINT8 dims: [ 65536 ] }, { name: "INDEX" data_type: TYPE_INT32 dims: [ 1 ] } ]
                instance_group [ { kind: KIND_CPU count: 1 } ]
                """);
        Files.writeString(model.resolve("model.py"), """
                # Sends N responses of 64 KiB, until the request is cancelled; appends each index to the file
                # PROGRESS/<request id> before sending it, and writes PROGRESS/<request id>.done after its FINAL.
                import os

                import numpy as np

                import triton_python_backend_utils as pb_utils

                PROGRESS = %s


                class TritonPythonModel:
                    def execute(self, requests):
                        for request in requests:
                            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
                            name = os.path.join(PROGRESS, request.request_id() or "progress")
                            sender = request.get_response_sender()
                            with open(name, "a") as progress:
                                for i in range(n):
                                    if sender.is_cancelled():
                                        break
                                    progress.write("%%d\\n" %% i)
                                    progress.flush()
                                    out = np.full(65536, i %% 251, dtype=np.uint8)
                                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out),
                                                                            pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))]))
                            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                            with open(name + ".done", "w"):
                                pass
                        return None
                """.formatted(pythonString(temp.toString())));
        return temp.resolve("repo");
    }

    /** A host on {@code repo} whose Python stubs use the test interpreter. */
    private static BackplaneHost host(Path repo) {
        return BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE)
                .backendOption("python", StubSettings.INTERPRETER, PythonApiTest.PYTHON).build();
    }

    /** A channel to gRPC frontend {@code f} with a fixed 1 MiB window (no BDP auto-tuning): the transport's slack stays what BOUND assumes. */
    private static ManagedChannel channel(Frontend f) {
        URI endpoint = URI.create(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
        return NettyChannelBuilder.forAddress(endpoint.getHost(), endpoint.getPort()).usePlaintext().flowControlWindow(1 << 20).build();
    }

    private static String pythonString(String s) {
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }
}
