package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.CudaSharedMemoryStatusRequest;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.protocol.inference.SystemSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.SystemSharedMemoryStatusRequest;
import io.backplane.protocol.inference.SystemSharedMemoryUnregisterRequest;
import io.backplane.spi.DataType;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Triton's system shared-memory extension through the real gRPC server, with the generated Triton stubs. */
class GrpcSharedMemoryTest {
    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub client;
    String key;
    Path file;

    @BeforeEach
    void start() throws Exception {
        key = "/backplane-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        file = Path.of("/dev/shm", key.substring(1));
        Files.write(file, new byte[4096]);
        host = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32))
                .loadModel("identity").build();
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        frontend.start();
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", frontend.port(), InsecureChannelCredentials.create()).build();
        client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        frontend.close();
        host.close();
        Files.deleteIfExists(file);
        TestSupport.assertNoBackplaneThreads();
    }

    static Map<String, InferParameter> shm(String region, long offset, long size) {
        return Map.of("shared_memory_region", InferParameter.newBuilder().setStringParam(region).build(),
                "shared_memory_offset", InferParameter.newBuilder().setInt64Param(offset).build(),
                "shared_memory_byte_size", InferParameter.newBuilder().setInt64Param(size).build());
    }

    @Test
    void modelInfer_inputAndOutputInARegion_roundTrip() throws Exception {
        client.systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest.newBuilder().setName("io").setKey(key).setByteSize(4096).build());
        assertEquals(4096, client.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.newBuilder().setName("io").build())
                .getRegionsOrThrow("io").getByteSize());
        assertTrue(client.serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList().contains("system_shared_memory"));
        ByteBuffer in = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putFloat(5).putFloat(6).putFloat(7).putFloat(8);
        byte[] all = Files.readAllBytes(file);
        System.arraycopy(in.array(), 0, all, 64, 16);
        Files.write(file, all);

        ModelInferResponse r = client.modelInfer(ModelInferRequest.newBuilder().setModelName("identity")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(4).putAllParameters(shm("io", 64, 16)))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUT0").putAllParameters(shm("io", 1024, 100)))
                .build());

        assertEquals(16, r.getOutputs(0).getParametersOrThrow("shared_memory_byte_size").getInt64Param());
        assertTrue(r.getRawOutputContents(0).isEmpty());
        byte[] got = new byte[16];
        System.arraycopy(Files.readAllBytes(file), 1024, got, 0, 16);
        assertArrayEquals(in.array(), got);
        client.systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest.getDefaultInstance());
        assertEquals(0, client.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.getDefaultInstance()).getRegionsCount());
    }

    @Test
    void modelInfer_sizeBeyondTheRegion_invalidArgumentNamingTheRegion() {
        client.systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest.newBuilder().setName("r").setKey(key).setByteSize(64).build());
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(ModelInferRequest.newBuilder()
                .setModelName("identity")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(32).putAllParameters(shm("r", 0, 128)))
                .build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("outside region 'r' of 64 bytes"), e.getStatus().getDescription());
    }

    /** Triton refuses typed contents on an input that names a region, with this wording. */
    @Test
    void modelInfer_contentsBesideARegion_invalidArgumentAsTritonWordsIt() {
        client.systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest.newBuilder().setName("r").setKey(key).setByteSize(64).build());
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(ModelInferRequest.newBuilder()
                .setModelName("identity")
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(2).putAllParameters(shm("r", 0, 8))
                        .setContents(io.backplane.protocol.inference.InferTensorContents.newBuilder().addFp32Contents(1f).addFp32Contents(2f)))
                .build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertEquals("unexpected 'content' provided when using shared memory for input tensor 'IN0' for model 'identity'",
                e.getStatus().getDescription());
    }

    @Test
    void register_objectSmallerThanClaimed_invalidArgumentAndNotRegistered() {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.systemSharedMemoryRegister(
                SystemSharedMemoryRegisterRequest.newBuilder().setName("r").setKey(key).setByteSize(1 << 20).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertEquals(0, client.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.getDefaultInstance()).getRegionsCount());
        assertEquals(0, client.cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest.getDefaultInstance()).getRegionsCount(),
                "no GPU: no CUDA region, as Triton without GPUs answers");
    }

    @Test
    void register_missingObject_tritonsSentenceWhateverTheSize() {
        // Triton's QA (python_grpc_aio_test) registers a missing "/test_shm" with byte_size 0 and expects
        // INTERNAL "Unable to open shared memory region: '/test_shm'": the object is opened before sizes are checked.
        String missing = "/backplane-test-missing-" + System.nanoTime();
        for (long size : new long[] {0, 64}) {
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.systemSharedMemoryRegister(
                    SystemSharedMemoryRegisterRequest.newBuilder().setName("test_shm").setKey(missing).setByteSize(size).build()));
            assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
            assertTrue(e.getStatus().getDescription().startsWith("Unable to open shared memory region: '" + missing + "'"),
                    e.getStatus().getDescription());
        }
        assertEquals(0, client.systemSharedMemoryStatus(SystemSharedMemoryStatusRequest.getDefaultInstance()).getRegionsCount());
    }
}
