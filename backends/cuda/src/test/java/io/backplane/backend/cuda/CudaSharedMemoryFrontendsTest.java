package io.backplane.backend.cuda;

import static io.backplane.backend.cuda.Fixtures.floats;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.grpc.GrpcFrontendFactory;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.inference.CudaSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.CudaSharedMemoryStatusRequest;
import io.backplane.protocol.inference.CudaSharedMemoryStatusResponse;
import io.backplane.protocol.inference.CudaSharedMemoryUnregisterRequest;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Triton's {@code cudasharedmemory} extension end to end: the real host serving the saxpy sample
 * on the cuda backend, the real REST and gRPC frontends sharing one registry, real HTTP and gRPC
 * clients, and the fake driver only below {@link CudaDriver}. "The client" allocates X, Y and OUT
 * on the fake GPU and sends their IPC handles; the server copies inputs device→host and the output
 * host→device through the driver.
 */
class CudaSharedMemoryFrontendsTest {
    @TempDir
    Path repository;
    private FakeCudaDriver driver;
    private long clientContext;
    private final List<Long> clientAllocations = new ArrayList<>();

    @BeforeEach
    void setUp() throws IOException {
        Path model = Files.createDirectories(repository.resolve("saxpy_cuda/1"));
        Files.copy(Fixtures.SAMPLE.resolve("config.pbtxt"), model.resolveSibling("config.pbtxt"));
        Files.copy(Fixtures.SAMPLE.resolve("1/saxpy.ptx"), model.resolve("saxpy.ptx"));
        driver = Fixtures.fake(1);
        Fixtures.usable(driver);
        clientContext = driver.primaryContextRetain(0);
    }

    @AfterEach
    void tearDown() {
        assertEquals(0, driver.liveIpcMappings(), "an IPC mapping is still open");
        driver.contextPush(clientContext);
        clientAllocations.forEach(driver::memFree);
        driver.contextPop();
        driver.primaryContextRelease(0);
        assertEquals(0, driver.retainCount(0));
        driver.close();
    }

    /** A device allocation of the client holding {@code values}, and its IPC handle. */
    private long alloc(float[] values, long bytes) {
        driver.contextPush(clientContext);
        try {
            long p = driver.memAlloc(bytes);
            clientAllocations.add(p);
            MemorySegment.copy(MemorySegment.ofArray(values), 0, driver.deviceMemory(p, 4L * values.length), 0, 4L * values.length);
            return p;
        } finally {
            driver.contextPop();
        }
    }

    private float[] read(long pointer, int n) {
        return driver.deviceMemory(pointer, 4L * n).toArray(ValueLayout.JAVA_FLOAT);
    }

    private static void assertSaxpy(float[] x, float[] y, float[] out) {
        for (int i = 0; i < x.length; i++) {
            assertEquals(Math.fma(2.0f, x[i], y[i]), out[i], "OUT[" + i + "]");
        }
    }

    private static String restInfer(int n, String x, String y, String out, long outOffset) {
        return "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[1," + n + "],\"parameters\":{\"shared_memory_region\":\"" + x
                + "\",\"shared_memory_byte_size\":" + 4 * n + "}},{\"name\":\"Y\",\"datatype\":\"FP32\",\"shape\":[1," + n
                + "],\"parameters\":{\"shared_memory_region\":\"" + y + "\",\"shared_memory_byte_size\":" + 4 * n
                + "}}],\"outputs\":[{\"name\":\"OUT\",\"parameters\":{\"shared_memory_region\":\"" + out + "\",\"shared_memory_offset\":" + outOffset
                + ",\"shared_memory_byte_size\":" + 4 * n + "}}]}";
    }

    @Test
    void registerOverRestAndGrpc_inferThroughTheDriver_statusAndUnregisterCloseEachHandleOnce() throws Exception {
        int n = 32;
        float[] x = floats(n, 1);
        float[] y = floats(n, 2);
        long px = alloc(x, 4L * n);
        long py = alloc(y, 4L * n);
        long pout = alloc(new float[0], 8L * n);
        Map<String, String> options = Map.of("host", "127.0.0.1", "port", "0");
        SystemSharedMemory shm = new SystemSharedMemory(new CudaSharedMemoryRegistry(driver));
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository).loadModel("saxpy_cuda").backend(Fixtures.factory(driver)).build();
                HttpClient rest = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
            Frontend http = new HttpFrontendFactory().create(new GpuSelfTest.Frontends(host, options, shm));
            Frontend grpc = new GrpcFrontendFactory().create(new GpuSelfTest.Frontends(host, options, shm));
            ManagedChannel channel = null;
            try {
                http.start();
                grpc.start();
                String base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
                // REST register, Triton's JSON: raw_handle as {"b64": ...}
                HttpResponse<String> reg = post(rest, base + "/v2/cudasharedmemory/region/x/register", "{\"raw_handle\":{\"b64\":\""
                        + Base64.getEncoder().encodeToString(driver.exportHandle(px)) + "\"},\"device_id\":0,\"byte_size\":" + 4 * n + "}");
                assertEquals(200, reg.statusCode(), reg.body());

                HttpResponse<String> meta = rest.send(HttpRequest.newBuilder(URI.create(base + "/v2")).GET().build(), HttpResponse.BodyHandlers.ofString());
                assertTrue(meta.body().contains("\"system_shared_memory\",\"cuda_shared_memory\""), meta.body());
                String grpcTarget = grpc.endpoint().replaceFirst("^[a-z]+://", "");
                channel = Grpc.newChannelBuilder(grpcTarget, InsecureChannelCredentials.create()).build();
                var client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
                client.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder().setName("y").setDeviceId(0).setByteSize(4L * n)
                        .setRawHandle(ByteString.copyFrom(driver.exportHandle(py))).build());
                client.cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder().setName("out").setDeviceId(0).setByteSize(8L * n)
                        .setRawHandle(ByteString.copyFrom(driver.exportHandle(pout))).build());
                assertEquals(3, driver.ipcOpens());
                assertTrue(client.serverMetadata(io.backplane.protocol.inference.ServerMetadataRequest.getDefaultInstance()).getExtensionsList()
                        .contains("cuda_shared_memory"));

                // one registry: what either frontend registered, both list, as Triton's status does
                HttpResponse<String> st = rest.send(HttpRequest.newBuilder(URI.create(base + "/v2/cudasharedmemory/status")).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                assertEquals("[{\"name\":\"out\",\"device_id\":0,\"byte_size\":256},{\"name\":\"x\",\"device_id\":0,\"byte_size\":128},"
                        + "{\"name\":\"y\",\"device_id\":0,\"byte_size\":128}]", st.body());
                CudaSharedMemoryStatusResponse gst = client.cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest.newBuilder().setName("x").build());
                assertEquals(128, gst.getRegionsOrThrow("x").getByteSize());
                assertEquals(0, gst.getRegionsOrThrow("x").getDeviceId());

                // REST infer: inputs read device->host, the output written host->device at offset 0
                HttpResponse<String> r = post(rest, base + "/v2/models/saxpy_cuda/infer", restInfer(n, "x", "y", "out", 0));
                assertEquals(200, r.statusCode(), r.body());
                assertTrue(r.body().contains("\"shared_memory_region\":\"out\""), r.body());
                assertSaxpy(x, y, read(pout, n));

                // gRPC infer: the output at offset 4n of the same region
                ModelInferResponse gr = client.modelInfer(ModelInferRequest.newBuilder().setModelName("saxpy_cuda")
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("X").setDatatype("FP32").addShape(1).addShape(n)
                                .putAllParameters(CudaIpcClient.region("x", 0, 4L * n)))
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("Y").setDatatype("FP32").addShape(1).addShape(n)
                                .putAllParameters(CudaIpcClient.region("y", 0, 4L * n)))
                        .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUT").putAllParameters(CudaIpcClient.region("out", 4L * n, 4L * n)))
                        .build());
                assertEquals(0, gr.getRawOutputContents(0).size(), "the output went to the CUDA region, not the response");
                assertEquals(4L * n, gr.getOutputs(0).getParametersOrThrow(SystemSharedMemory.BYTE_SIZE).getInt64Param());
                float[] second = driver.deviceMemory(pout + 4L * n, 4L * n).toArray(ValueLayout.JAVA_FLOAT);
                assertSaxpy(x, y, second);

                // bounds: Triton's sentence and the bad offset and size
                HttpResponse<String> bad = post(rest, base + "/v2/models/saxpy_cuda/infer", restInfer(n, "x", "y", "out", 5L * n));
                assertEquals(400, bad.statusCode(), bad.body());
                assertTrue(bad.body().contains("output 'OUT': Invalid offset + byte size for shared memory region: 'out' (shared_memory_offset 160"
                        + " + shared_memory_byte_size 128 is outside its 256 bytes)"), bad.body());
                StatusRuntimeException gbad = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(ModelInferRequest.newBuilder()
                        .setModelName("saxpy_cuda").addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("X").setDatatype("FP32")
                                .addShape(1).addShape(n).putAllParameters(CudaIpcClient.region("x", 8, 4L * n)))
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("Y").setDatatype("FP32").addShape(1).addShape(n)
                                .putAllParameters(CudaIpcClient.region("y", 0, 4L * n)))
                        .build()));
                assertEquals(Status.Code.INVALID_ARGUMENT, gbad.getStatus().getCode());
                assertTrue(gbad.getStatus().getDescription().contains("input 'X': Invalid offset + byte size for shared memory region: 'x'"
                        + " (shared_memory_offset 8 + shared_memory_byte_size 128"), gbad.getStatus().getDescription());

                // errors of the register, Triton's sentences first
                HttpResponse<String> dup = post(rest, base + "/v2/cudasharedmemory/region/x/register", "{\"raw_handle\":{\"b64\":\""
                        + Base64.getEncoder().encodeToString(driver.exportHandle(px)) + "\"},\"device_id\":0,\"byte_size\":4}");
                assertEquals(400, dup.statusCode());
                assertTrue(dup.body().contains("shared memory region 'x' already in manager"), dup.body());
                HttpResponse<String> shortHandle = post(rest, base + "/v2/cudasharedmemory/region/z/register",
                        "{\"raw_handle\":{\"b64\":\"AAAA\"},\"device_id\":0,\"byte_size\":4}");
                assertEquals(400, shortHandle.statusCode());
                assertTrue(shortHandle.body().contains("raw_handle is 3 bytes but a cudaIpcMemHandle_t is 64"), shortHandle.body());
                StatusRuntimeException badDevice = assertThrows(StatusRuntimeException.class, () -> client.cudaSharedMemoryRegister(
                        CudaSharedMemoryRegisterRequest.newBuilder().setName("z").setDeviceId(3).setByteSize(4)
                                .setRawHandle(ByteString.copyFrom(driver.exportHandle(py))).build()));
                assertTrue(badDevice.getStatus().getDescription().contains("device_id 3 is not a GPU of this server"), badDevice.getStatus().getDescription());
                assertEquals(3, driver.ipcOpens(), "refused registers opened nothing");

                // unregister one over gRPC, then all over REST: each handle closed once
                client.cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest.newBuilder().setName("y").build());
                assertEquals(1, driver.ipcCloses());
                StatusRuntimeException again = assertThrows(StatusRuntimeException.class,
                        () -> client.cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest.newBuilder().setName("y").build()));
                assertEquals(Status.Code.NOT_FOUND, again.getStatus().getCode());
                assertEquals(200, post(rest, base + "/v2/cudasharedmemory/unregister", "").statusCode());
                assertEquals(200, post(rest, base + "/v2/cudasharedmemory/unregister", "").statusCode());
                assertEquals(3, driver.ipcCloses(), "unregister-all twice closes each handle once");
                HttpResponse<String> empty = rest.send(HttpRequest.newBuilder(URI.create(base + "/v2/cudasharedmemory/status")).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                assertEquals("[]", empty.body());
                HttpResponse<String> gone = rest.send(HttpRequest.newBuilder(URI.create(base + "/v2/cudasharedmemory/region/x/status")).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                assertEquals(404, gone.statusCode());
                assertTrue(gone.body().contains("Unable to find shared memory region: 'x'"), gone.body());
            } finally {
                if (channel != null) {
                    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                }
                grpc.close();
                http.close();
                shm.close();
            }
        }
        assertEquals(driver.ipcOpens(), driver.ipcCloses());
    }

    @Test
    void closingTheSharedRegistry_closesEveryHandleStillRegistered_once() throws Exception {
        long p = alloc(new float[] {1}, 64);
        SystemSharedMemory shm = new SystemSharedMemory(new CudaSharedMemoryRegistry(driver));
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository).backend(Fixtures.factory(driver)).build();
                HttpClient rest = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
            Frontend http = new HttpFrontendFactory().create(new GpuSelfTest.Frontends(host, Map.of("host", "127.0.0.1", "port", "0"), shm));
            try {
                http.start();
                String base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
                HttpResponse<String> reg = post(rest, base + "/v2/cudasharedmemory/region/a/register", "{\"raw_handle\":{\"b64\":\""
                        + Base64.getEncoder().encodeToString(driver.exportHandle(p)) + "\"},\"device_id\":0,\"byte_size\":64}");
                assertEquals(200, reg.statusCode(), reg.body());
                // a system region may not take a CUDA region's name: one namespace, as Triton has
                assertThrows(io.backplane.spi.BackplaneException.class, () -> shm.register("a", "/nope", 0, 1));
            } finally {
                http.close();
            }
            shm.close();
            shm.close();
            assertEquals(1, driver.ipcCloses());
        }
    }

    @Test
    void hostWithoutLibcuda_offersARegistryThatIsNotAvailable_andTheFrontendsRefuseAsBefore() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository).backend(new CudaBackendFactory()).build();
                HttpClient rest = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
            org.junit.jupiter.api.Assumptions.assumeFalse(CudaLibrary.load(CudaLibrary.DEFAULT_LIBRARY).usable(), "this machine has a usable GPU");
            io.backplane.spi.host.DeviceSharedMemory d = host.openDeviceSharedMemory();
            assertTrue(!d.available());
            SystemSharedMemory shm = new SystemSharedMemory(d);
            Frontend http = new HttpFrontendFactory().create(new GpuSelfTest.Frontends(host, Map.of("host", "127.0.0.1", "port", "0"), shm));
            try {
                http.start();
                String base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
                HttpResponse<String> reg = post(rest, base + "/v2/cudasharedmemory/region/gpu0/register", "{\"raw_handle\":{\"b64\":\"\"},\"device_id\":0,\"byte_size\":4}");
                assertEquals(501, reg.statusCode(), reg.body());
                assertTrue(reg.body().contains("failed to register CUDA shared memory region: 'gpu0', GPUs not supported"), reg.body());
            } finally {
                http.close();
                shm.close();
            }
        }
    }

    private static HttpResponse<String> post(HttpClient c, String url, String body) throws Exception {
        return c.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }
}
