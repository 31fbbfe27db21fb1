package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.testkit.Await;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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
     * the client's 1 MiB HTTP/2 window (16 responses), one index written before its send blocks.
     * Runs measured 80 to 82 ahead; the margin keeps scheduling noise from failing the test, and a
     * model without flow control runs far past it (to {@value #N}).
     */
    static final int BOUND = CREDITS + 48;

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
        Path progress = temp.resolve("progress");
        Files.writeString(progress, "");
        Path repo = repository(progress);
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE)
                .backendOption("python", StubSettings.INTERPRETER, PythonApiTest.PYTHON).build();
                Frontend f = host.frontendFactories().get("grpc").create(context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            URI endpoint = URI.create(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            // A fixed window (no BDP auto-tuning): the transport's slack stays what BOUND assumes.
            ManagedChannel channel = NettyChannelBuilder.forAddress(endpoint.getHost(), endpoint.getPort()).usePlaintext()
                    .flowControlWindow(1 << 20).build();
            try {
                SlowReader reader = new SlowReader();
                var requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS).modelStreamInfer(reader);
                ByteBuffer count = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(N);
                requests.onNext(ModelInferRequest.newBuilder().setModelName("flood").setId("flood-1")
                        .putParameters(GrpcEmptyFinal.NAME, InferParameter.newBuilder().setBoolParam(true).build())
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("N").setDatatype("INT32").addShape(1))
                        .addRawInputContents(ByteString.copyFrom(count.array())).build());
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
                        int spent = Math.min(N, CREDITS);
                        Await.until(() -> sent(progress) >= spent, Duration.ofSeconds(60), "the model to spend its " + CREDITS + " credits");
                        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
                        while (sent(progress) - k <= BOUND && System.nanoTime() - end < 0) {
                            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
                        }
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

    /** How many indexes the model has written (each before its send). */
    private static int sent(Path progress) {
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

    private Path repository(Path progress) throws IOException {
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
                # Sends N responses of 64 KiB; appends each index to PROGRESS before sending it.
                import numpy as np

                import triton_python_backend_utils as pb_utils

                PROGRESS = %s


                class TritonPythonModel:
                    def execute(self, requests):
                        for request in requests:
                            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
                            sender = request.get_response_sender()
                            with open(PROGRESS, "a") as progress:
                                for i in range(n):
                                    progress.write("%%d\\n" %% i)
                                    progress.flush()
                                    out = np.full(65536, i %% 251, dtype=np.uint8)
                                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out),
                                                                            pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))]))
                            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        return None
                """.formatted(pythonString(progress.toString())));
        return temp.resolve("repo");
    }

    private static String pythonString(String s) {
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    private static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }
}
