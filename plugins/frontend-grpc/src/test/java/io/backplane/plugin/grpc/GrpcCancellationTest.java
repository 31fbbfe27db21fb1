package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.CancelBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.host.HostListener.Outcome;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * DESIGN R2 and B6 at the gRPC edge, through the real server with the generated stubs: a call the
 * client cancels while it executes, a ModelStreamInfer stream the client cancels after three
 * responses, and a request that waits in the queue when its call or stream is cancelled. The
 * backend sees each cancellation ({@link CancelBackend}); a queued request is removed at once and
 * never reaches it; the server then serves the next call on the same channel.
 */
class GrpcCancellationTest {
    CancelBackend backend;
    CancelBackend.Outcomes outcomes;
    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceStub async;

    @BeforeEach
    void start() throws Exception {
        backend = new CancelBackend();
        outcomes = new CancelBackend.Outcomes();
        host = backend.host(outcomes);
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", frontend.port(), InsecureChannelCredentials.create()).build();
        async = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws Exception {
        backend.release.countDown();
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        frontend.close();
        host.close();
        TestSupport.assertNoBackplaneThreads();
        assertEquals(List.of(), backend.problems, "the models waited for a cancellation that never came");
    }

    @Test
    void modelInfer_callCancelledMidExecute_modelSeesCancellation_nextCallServed() throws Exception {
        Context.CancellableContext call = Context.current().withCancellation();
        CompletableFuture<ModelInferResponse> answer = new CompletableFuture<>();
        call.run(() -> async.modelInfer(waitRequest(1), observer(answer)));
        assertEquals("1", started());
        call.cancel(null);
        assertEquals("1", backend.cancelled.poll(30, TimeUnit.SECONDS), "the model did not see the cancelled call");
        assertEquals(new CancelBackend.Outcomes.Ended("wait", Outcome.CANCELED, true), outcomes.next());
        assertEquals(Status.Code.CANCELLED, statusOf(answer));

        backend.release.countDown();
        assertEquals("OUT0", infer(3).getOutputs(0).getName());
        assertEquals("3", started());
    }

    @Test
    void modelStreamInfer_streamCancelledAfterThreeResponses_modelSeesCancellationAndStops_noMoreResponses() throws Exception {
        Stream first = new Stream(3);
        StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(first);
        requests.onNext(tokensRequest("first"));
        assertEquals("first", started());
        first.third.get(30, TimeUnit.SECONDS);
        ((ClientCallStreamObserver<ModelInferRequest>) requests).cancel("the client goes away", null);
        String seen = backend.cancelled.poll(30, TimeUnit.SECONDS);
        assertTrue(seen != null && seen.startsWith("first after "), "the model did not see the cancelled stream: " + seen);
        assertEquals(new CancelBackend.Outcomes.Ended("tokens", Outcome.CANCELED, true), outcomes.next());
        assertEquals(Status.Code.CANCELLED, Status.fromThrowable(first.end.get(30, TimeUnit.SECONDS)).getCode());
        assertEquals(3, first.got.size(), "the cancelled stream got nothing after the three responses it asked for: " + first.got);
        for (ModelStreamInferResponse r : first.got) {
            assertEquals("", r.getErrorMessage());
        }

        // the one instance stopped streaming to the cancelled call: it serves the next stream on the same channel
        Stream second = new Stream(1);
        StreamObserver<ModelInferRequest> again = async.modelStreamInfer(second);
        again.onNext(tokensRequest("second"));
        assertEquals("second", started());
        second.third.get(30, TimeUnit.SECONDS);
        again.onError(Status.CANCELLED.withDescription("done").asRuntimeException());
        String next = backend.cancelled.poll(30, TimeUnit.SECONDS);
        assertTrue(next != null && next.startsWith("second after "), "the second stream's cancellation: " + next);
    }

    @Test
    void modelInfer_queuedCallCancelled_removedAtOnce_neverReachesTheModel() throws Exception {
        CompletableFuture<ModelInferResponse> held = new CompletableFuture<>();
        async.modelInfer(waitRequest(1), observer(held));
        assertEquals("1", started());
        Context.CancellableContext call = Context.current().withCancellation();
        CompletableFuture<ModelInferResponse> queued = new CompletableFuture<>();
        call.run(() -> async.modelInfer(waitRequest(2), observer(queued)));
        outcomes.awaitAccepted("wait", 2); // queued behind request 1 on the only instance
        call.cancel(null);
        assertEquals(new CancelBackend.Outcomes.Ended("wait", Outcome.CANCELED, false), outcomes.next(),
                "the queued request ends CANCELLED at once, while the instance is still busy, without being dispatched");
        assertEquals(Status.Code.CANCELLED, statusOf(queued));

        backend.release.countDown();
        assertEquals("OUT0", held.get(30, TimeUnit.SECONDS).getOutputs(0).getName(), "the held request completes normally");
        assertEquals("OUT0", infer(3).getOutputs(0).getName());
        assertEquals("3", started(), "the cancelled request 2 never reached the model");
        assertNull(backend.cancelled.poll(), "the model saw no cancellation: the request never reached it");
    }

    @Test
    void modelStreamInfer_streamCancelledWhileItsRequestIsQueued_removedAtOnce_neverReachesTheModel() throws Exception {
        CompletableFuture<ModelInferResponse> held = new CompletableFuture<>();
        async.modelInfer(waitRequest(1), observer(held));
        assertEquals("1", started());
        Stream stream = new Stream(1);
        StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(stream);
        requests.onNext(waitRequest(2));
        outcomes.awaitAccepted("wait", 2);
        ((ClientCallStreamObserver<ModelInferRequest>) requests).cancel("the client goes away", null);
        assertEquals(new CancelBackend.Outcomes.Ended("wait", Outcome.CANCELED, false), outcomes.next());
        assertEquals(Status.Code.CANCELLED, Status.fromThrowable(stream.end.get(30, TimeUnit.SECONDS)).getCode());
        assertEquals(List.of(), stream.got);

        backend.release.countDown();
        assertEquals("OUT0", held.get(30, TimeUnit.SECONDS).getOutputs(0).getName(), "the held request completes normally");
        assertEquals("OUT0", infer(3).getOutputs(0).getName());
        assertEquals("3", started(), "the cancelled request 2 never reached the model");
        assertNull(backend.cancelled.poll());
    }

    // ---- helpers ----

    /** A ModelStreamInfer client that asks gRPC for {@code asked} responses only, as a client that reads that many and stops. */
    static final class Stream implements ClientResponseObserver<ModelInferRequest, ModelStreamInferResponse> {
        final int asked;
        final List<ModelStreamInferResponse> got = Collections.synchronizedList(new ArrayList<>());
        final CompletableFuture<Void> third = new CompletableFuture<>();
        final CompletableFuture<Throwable> end = new CompletableFuture<>();

        Stream(int asked) {
            this.asked = asked;
        }

        @Override
        public void beforeStart(ClientCallStreamObserver<ModelInferRequest> call) {
            call.disableAutoRequestWithInitial(asked);
        }

        @Override
        public void onNext(ModelStreamInferResponse r) {
            got.add(r);
            if (got.size() >= asked) {
                third.complete(null);
            }
        }

        @Override
        public void onError(Throwable t) {
            end.complete(t);
        }

        @Override
        public void onCompleted() {
            end.complete(null);
        }
    }

    private String started() throws InterruptedException {
        String tag = backend.started.poll(30, TimeUnit.SECONDS);
        assertTrue(tag != null, "no request reached the model within 30 s");
        return tag;
    }

    private ModelInferResponse infer(int value) throws Exception {
        CompletableFuture<ModelInferResponse> f = new CompletableFuture<>();
        async.modelInfer(waitRequest(value), observer(f));
        return f.get(30, TimeUnit.SECONDS);
    }

    private static StreamObserver<ModelInferResponse> observer(CompletableFuture<ModelInferResponse> into) {
        return new StreamObserver<>() {
            @Override
            public void onNext(ModelInferResponse r) {
                into.complete(r);
            }

            @Override
            public void onError(Throwable t) {
                into.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
            }
        };
    }

    private static Status.Code statusOf(CompletableFuture<ModelInferResponse> f) throws Exception {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            return assertInstanceOf(StatusRuntimeException.class, e.getCause()).getStatus().getCode();
        }
        throw new AssertionError("the cancelled call got an answer");
    }

    static ModelInferRequest waitRequest(int value) {
        return ModelInferRequest.newBuilder().setModelName("wait").setId("r" + value).addInputs(ModelInferRequest.InferInputTensor.newBuilder()
                .setName("IN0").setDatatype("FP32").addShape(1).setContents(InferTensorContents.newBuilder().addFp32Contents(value))).build();
    }

    static ModelInferRequest tokensRequest(String text) {
        return ModelInferRequest.newBuilder().setModelName("tokens").setId(text).addInputs(ModelInferRequest.InferInputTensor.newBuilder()
                .setName("text_input").setDatatype("BYTES").addShape(1).setContents(InferTensorContents.newBuilder().addBytesContents(ByteString.copyFromUtf8(text))))
                .build();
    }
}
