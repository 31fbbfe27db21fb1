package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.protocol.inference.SystemSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.SystemSharedMemoryUnregisterRequest;
import io.backplane.spi.DataType;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * ModelStreamInfer as Triton serves it, through the real gRPC server with the stubs generated from
 * Triton's grpc_service.proto: {@code triton_final_response} on every response,
 * {@code triton_enable_empty_final_response}, the {@code triton_grpc_error} header, shared memory.
 */
class GrpcStreamTest {
    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceStub async;
    String key;
    Path file;

    @BeforeEach
    void start() throws Exception {
        key = "/backplane-stream-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        file = Path.of("/dev/shm", key.substring(1));
        Files.write(file, new byte[4096]);
        host = BackplaneHost.builder().backend(new TestBackend()).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.identity("identity", DataType.FP32)).model(TestBackend.repeat("repeat")).model(TestBackend.failing("fail"))
                .loadModel("identity").loadModel("repeat").loadModel("fail").build();
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", frontend.port(), InsecureChannelCredentials.create()).build();
        async = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        frontend.close();
        host.close();
        Files.deleteIfExists(file);
        TestSupport.assertNoBackplaneThreads();
    }

    /** One stream's responses and its end: null when completed, else the error it ended with. */
    static final class Collector implements StreamObserver<ModelStreamInferResponse> {
        final List<ModelStreamInferResponse> got = Collections.synchronizedList(new ArrayList<>());
        final CompletableFuture<Throwable> end = new CompletableFuture<>();
        final CompletableFuture<ModelStreamInferResponse> first = new CompletableFuture<>();

        @Override
        public void onNext(ModelStreamInferResponse r) {
            got.add(r);
            first.complete(r);
        }

        @Override
        public void onError(Throwable t) {
            end.complete(t);
        }

        @Override
        public void onCompleted() {
            end.complete(null);
        }

        Throwable awaitEnd() throws ExecutionException, InterruptedException, java.util.concurrent.TimeoutException {
            return end.get(30, TimeUnit.SECONDS);
        }

        List<ModelStreamInferResponse> of(String id) {
            synchronized (got) {
                return got.stream().filter(r -> r.getInferResponse().getId().equals(id)).toList();
            }
        }
    }

    static ModelInferRequest repeat(String id, long n, boolean emptyFinal) {
        ModelInferRequest.Builder b = ModelInferRequest.newBuilder().setModelName("repeat").setId(id)
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN").setDatatype("INT64").addShape(1)
                        .setContents(InferTensorContents.newBuilder().addInt64Contents(n)));
        if (emptyFinal) {
            b.putParameters("triton_enable_empty_final_response", InferParameter.newBuilder().setBoolParam(true).build());
        }
        return b.build();
    }

    static ModelInferRequest fp32(String model, String id, float... values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putFloat(v);
        }
        return ModelInferRequest.newBuilder().setModelName(model).setId(id)
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(values.length))
                .addRawInputContents(ByteString.copyFrom(b.array())).build();
    }

    static Boolean finalFlag(ModelStreamInferResponse r) {
        InferParameter p = r.getInferResponse().getParametersMap().get("triton_final_response");
        return p == null ? null : p.getBoolParam();
    }

    static GRPCInferenceServiceGrpc.GRPCInferenceServiceStub withGrpcError(GRPCInferenceServiceGrpc.GRPCInferenceServiceStub stub) {
        Metadata md = new Metadata();
        md.put(Metadata.Key.of("triton_grpc_error", Metadata.ASCII_STRING_MARSHALLER), "true");
        return stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md));
    }

    @Test
    void stream_everyResponseCarriesTritonFinalResponse_trueOnlyOnTheLast() throws Exception {
        Collector c = new Collector();
        StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(c);
        requests.onNext(repeat("plain-decoupled", 3, false));
        requests.onNext(repeat("empty-final", 2, true));
        requests.onNext(repeat("none", 0, true));
        requests.onNext(fp32("identity", "one", 4f));
        requests.onCompleted();
        assertNull(c.awaitEnd());

        // A decoupled model's bare FINAL is not sent unless asked for: three responses, none final.
        List<ModelStreamInferResponse> p = c.of("plain-decoupled");
        assertEquals(3, p.size(), c.got.toString());
        assertTrue(p.stream().allMatch(r -> Boolean.FALSE.equals(finalFlag(r)) && r.getInferResponse().getRawOutputContentsCount() == 1), p.toString());

        // Asked for: the two responses say false, then an empty response with the request's id and model says true.
        List<ModelStreamInferResponse> e = c.of("empty-final");
        assertEquals(3, e.size(), e.toString());
        assertEquals(List.of(false, false, true), e.stream().map(GrpcStreamTest::finalFlag).toList());
        ModelInferResponse last = e.get(2).getInferResponse();
        assertEquals(0, last.getOutputsCount());
        assertEquals(0, last.getRawOutputContentsCount());
        assertEquals("repeat", last.getModelName());
        assertEquals(List.of(true), c.of("none").stream().map(GrpcStreamTest::finalFlag).toList());

        // A plain model's only response is its last.
        List<ModelStreamInferResponse> one = c.of("one");
        assertEquals(1, one.size(), one.toString());
        assertEquals(Boolean.TRUE, finalFlag(one.get(0)));
        assertArrayEquals(new float[] {4f}, GrpcFrontendTest.floats(one.get(0).getInferResponse().getRawOutputContents(0)));
        // The stream parameter is the frontend's, never the model's.
        assertFalse(one.get(0).getInferResponse().getParametersMap().containsKey("triton_enable_empty_final_response"));
    }

    @Test
    void stream_withoutGrpcErrorHeader_errorsStayInTheStream_andItGoesOn() throws Exception {
        Collector c = new Collector();
        StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(c);
        requests.onNext(fp32("nope", "unknown", 1f));
        requests.onNext(fp32("fail", "failing", 1f));
        requests.onNext(fp32("identity", "after", 2f));
        requests.onCompleted();
        assertNull(c.awaitEnd());

        ModelStreamInferResponse unknown = c.of("unknown").get(0);
        assertTrue(unknown.getErrorMessage().contains("nope"), unknown.toString());
        ModelStreamInferResponse failing = c.of("failing").get(0);
        assertTrue(failing.getErrorMessage().contains("failed on purpose"), failing.toString());
        assertEquals("fail", failing.getInferResponse().getModelName());
        assertEquals(Boolean.TRUE, finalFlag(failing));
        assertEquals(1, c.of("after").size(), c.got.toString());
    }

    @Test
    void stream_withGrpcErrorHeader_modelErrorEndsTheStreamWithItsStatus() throws Exception {
        Collector c = new Collector();
        StreamObserver<ModelInferRequest> requests = withGrpcError(async).modelStreamInfer(c);
        requests.onNext(fp32("identity", "before", 1f));
        assertEquals("before", c.first.get(30, TimeUnit.SECONDS).getInferResponse().getId());
        requests.onNext(fp32("fail", "failing", 1f));

        StatusRuntimeException e = assertInstanceOf(StatusRuntimeException.class, c.awaitEnd());
        assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("failed on purpose"), e.getStatus().toString());
        assertTrue(c.of("failing").isEmpty(), "the error is the status, not a message: " + c.got);
        requests.onNext(fp32("identity", "too-late", 1f)); // the call is over: dropped, never answered
        assertTrue(c.of("too-late").isEmpty());
    }

    @Test
    void stream_withGrpcErrorHeader_refusedRequestEndsTheStreamWithItsCategory() throws Exception {
        Collector c = new Collector();
        StreamObserver<ModelInferRequest> requests = withGrpcError(async).modelStreamInfer(c);
        requests.onNext(fp32("nope", "unknown", 1f));
        StatusRuntimeException e = assertInstanceOf(StatusRuntimeException.class, c.awaitEnd());
        assertEquals(Status.Code.NOT_FOUND, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("nope"), e.getStatus().toString());

        // The server and a new stream carry on; without errors the header changes nothing.
        Collector ok = new Collector();
        StreamObserver<ModelInferRequest> again = withGrpcError(async).modelStreamInfer(ok);
        again.onNext(repeat("r", 2, true));
        again.onCompleted();
        assertNull(ok.awaitEnd());
        assertEquals(List.of(false, false, true), ok.of("r").stream().map(GrpcStreamTest::finalFlag).toList());
    }

    @Test
    void stream_inputAndOutputInSharedMemory_roundTrip() throws Exception {
        GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS).systemSharedMemoryRegister(
                SystemSharedMemoryRegisterRequest.newBuilder().setName("io").setKey(key).setByteSize(4096).build());
        ByteBuffer in = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putFloat(3).putFloat(7);
        byte[] all = Files.readAllBytes(file);
        System.arraycopy(in.array(), 0, all, 128, 8);
        Files.write(file, all);

        Collector c = new Collector();
        StreamObserver<ModelInferRequest> requests = async.modelStreamInfer(c);
        requests.onNext(ModelInferRequest.newBuilder().setModelName("identity").setId("shm")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(2)
                        .putAllParameters(GrpcSharedMemoryTest.shm("io", 128, 8)))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUT0")
                        .putAllParameters(GrpcSharedMemoryTest.shm("io", 2048, 64)))
                .build());
        requests.onNext(ModelInferRequest.newBuilder().setModelName("identity").setId("liar")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(2)
                        .putAllParameters(GrpcSharedMemoryTest.shm("io", 4090, 8)))
                .build());
        requests.onCompleted();
        assertNull(c.awaitEnd());

        ModelInferResponse r = c.of("shm").get(0).getInferResponse();
        assertEquals(8, r.getOutputs(0).getParametersOrThrow("shared_memory_byte_size").getInt64Param());
        byte[] got = new byte[8];
        System.arraycopy(Files.readAllBytes(file), 2048, got, 0, 8);
        assertArrayEquals(in.array(), got);
        assertTrue(c.of("liar").get(0).getErrorMessage().contains("region 'io'"), c.got.toString());
        // Every lease ended with its request: the region unregisters and unmaps at once.
        GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS)
                .systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest.getDefaultInstance());
    }
}
