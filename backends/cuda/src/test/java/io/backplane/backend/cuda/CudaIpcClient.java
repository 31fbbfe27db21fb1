package io.backplane.backend.cuda;

import com.google.protobuf.ByteString;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.inference.CudaSharedMemoryRegisterRequest;
import io.backplane.protocol.inference.CudaSharedMemoryStatusRequest;
import io.backplane.protocol.inference.CudaSharedMemoryUnregisterRequest;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A client of Triton's {@code cudasharedmemory} extension over the CUDA driver API, as a Triton
 * user's {@code tritonclient.utils.cuda_shared_memory} would be: it allocates X, Y and OUT on GPU
 * 0 in its own process, exports them with {@code cuIpcGetMemHandle}, registers X over REST and Y
 * and OUT over gRPC, runs {@code saxpy_cuda} once through each protocol with the output written
 * into OUT by the server, reads OUT back and compares it with the CPU, then unregisters everything
 * and frees its memory.
 *
 * <p>{@link GpuSelfTest} starts it as a child process on a GPU machine (a CUDA IPC handle cannot be
 * opened in the process that made it), and calls {@link #run} in-process over the fake driver in CI.
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -cp 'lib/*' io.backplane.backend.cuda.CudaIpcClient
 *     --rest http://127.0.0.1:8000 --grpc 127.0.0.1:8001 [--elements N] [--library libcuda.so.1]</pre>
 *
 * <p>Exit status: 0 when every check passed, 1 when one failed, 2 without a usable CUDA driver.
 */
public final class CudaIpcClient {
    private static final Logger LOG = LoggerFactory.getLogger("cuda-ipc-client");
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private final CudaDriver driver;
    private final String rest;
    private final String grpcTarget;
    private int failed;

    CudaIpcClient(CudaDriver driver, String rest, String grpcTarget) {
        this.driver = driver;
        this.rest = rest.replaceAll("/+$", "");
        this.grpcTarget = grpcTarget;
    }

    public static void main(String[] args) {
        String restUrl = null;
        String grpc = null;
        String library = CudaLibrary.DEFAULT_LIBRARY;
        int n = 1 << 20;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rest" -> restUrl = args[++i];
                case "--grpc" -> grpc = args[++i];
                case "--elements" -> n = Integer.parseInt(args[++i]);
                case "--library" -> library = args[++i];
                default -> throw new IllegalArgumentException("unknown argument " + args[i]
                        + "; use --rest URL --grpc HOST:PORT [--elements N] [--library NAME]");
            }
        }
        if (restUrl == null || grpc == null) {
            throw new IllegalArgumentException("give both --rest URL and --grpc HOST:PORT of a server serving saxpy_cuda");
        }
        CudaLibrary.Status status = CudaLibrary.load(library);
        int code;
        if (!status.usable()) {
            LOG.error("no CUDA in the client: {}", status.problem());
            code = 2;
        } else {
            try {
                code = new CudaIpcClient(status.requireDriver(), restUrl, grpc).run(n) == 0 ? 0 : 1;
            } catch (Exception e) {
                LOG.error("the CUDA IPC client crashed", e);
                code = 1;
            }
        }
        Runtime.getRuntime().exit(code);
    }

    /** Runs the whole exchange with {@code n} elements per tensor; returns how many checks failed. */
    int run(int n) throws IOException, InterruptedException {
        int device = driver.device(0);
        long context = driver.primaryContextRetain(device);
        List<Long> allocations = new ArrayList<>();
        ManagedChannel channel = Grpc.newChannelBuilder(grpcTarget, InsecureChannelCredentials.create()).build();
        driver.contextPush(context);
        try (HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build(); Arena arena = Arena.ofConfined()) {
            Random rnd = new Random(11);
            float[] x = new float[n];
            float[] y = new float[n];
            for (int i = 0; i < n; i++) {
                x[i] = rnd.nextFloat() * 200f - 100f;
                y[i] = rnd.nextFloat() * 200f - 100f;
            }
            long bytes = 4L * n;
            long px = upload(x, arena, allocations);
            long py = upload(y, arena, allocations);
            long pout = driver.memAlloc(2 * bytes);
            allocations.add(pout);
            driver.memcpyHtoD(pout, arena.allocate(2 * bytes), 2 * bytes); // zeros: a result is the server's, not stale memory

            var grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel);
            HttpResponse<String> reg = post(http, "/v2/cudasharedmemory/region/x/register", "{\"raw_handle\":{\"b64\":\""
                    + Base64.getEncoder().encodeToString(driver.ipcGetMemHandle(px)) + "\"},\"device_id\":0,\"byte_size\":" + bytes + "}");
            check(reg.statusCode() == 200, "REST registers X's cudaIpcMemHandle_t (" + reg.statusCode() + " " + reg.body() + ")");
            grpc.withDeadlineAfter(TIMEOUT.toSeconds(), TimeUnit.SECONDS).cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder()
                    .setName("y").setDeviceId(0).setByteSize(bytes).setRawHandle(ByteString.copyFrom(driver.ipcGetMemHandle(py))).build());
            grpc.withDeadlineAfter(TIMEOUT.toSeconds(), TimeUnit.SECONDS).cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest.newBuilder()
                    .setName("out").setDeviceId(0).setByteSize(2 * bytes).setRawHandle(ByteString.copyFrom(driver.ipcGetMemHandle(pout))).build());
            int listed = grpc.withDeadlineAfter(TIMEOUT.toSeconds(), TimeUnit.SECONDS)
                    .cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest.getDefaultInstance()).getRegionsCount();
            check(listed == 3, "gRPC status lists the 3 regions registered over both protocols (lists " + listed + ")");

            HttpResponse<String> r = post(http, "/v2/models/saxpy_cuda/infer", "{\"inputs\":[" + restInput("X", "x", n) + "," + restInput("Y", "y", n)
                    + "],\"outputs\":[{\"name\":\"OUT\",\"parameters\":{\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":" + bytes + "}}]}");
            check(r.statusCode() == 200, "REST infer with X, Y and OUT in CUDA shared memory answers 200 (" + r.statusCode() + " "
                    + r.body().substring(0, Math.min(300, r.body().length())) + ")");
            check(GpuSelfTest.isSaxpy("REST", x, y, download(pout, n, arena)), "REST: OUT, written by the server into the client's GPU memory, is 2*X+Y for " + n + " elements");

            ModelInferResponse g = grpc.withDeadlineAfter(TIMEOUT.toSeconds(), TimeUnit.SECONDS).modelInfer(ModelInferRequest.newBuilder()
                    .setModelName("saxpy_cuda")
                    .addInputs(grpcInput("X", "x", n)).addInputs(grpcInput("Y", "y", n))
                    .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUT").putAllParameters(region("out", bytes, bytes)))
                    .build());
            check(g.getRawOutputContentsCount() == 0 || g.getRawOutputContents(0).isEmpty(), "gRPC infer sends no output bytes: OUT went to the region");
            check(GpuSelfTest.isSaxpy("gRPC", x, y, download(pout + bytes, n, arena)), "gRPC: OUT at offset " + bytes + " of the region is 2*X+Y");

            HttpResponse<String> un = post(http, "/v2/cudasharedmemory/region/x/unregister", "");
            check(un.statusCode() == 200, "REST unregisters X (" + un.statusCode() + ")");
            grpc.withDeadlineAfter(TIMEOUT.toSeconds(), TimeUnit.SECONDS).cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest.getDefaultInstance());
            HttpResponse<String> st = http.send(HttpRequest.newBuilder(URI.create(rest + "/v2/cudasharedmemory/status")).timeout(TIMEOUT).GET().build(),
                    HttpResponse.BodyHandlers.ofString());
            check("[]".equals(st.body()), "after gRPC's unregister-all REST status lists no region (" + st.body() + ")");
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            allocations.forEach(driver::memFree);
            driver.contextPop();
            driver.primaryContextRelease(device);
        }
        LOG.info("CUDA IPC client: {} check(s) failed", failed);
        return failed;
    }

    private long upload(float[] values, Arena arena, List<Long> allocations) {
        long bytes = 4L * values.length;
        long p = driver.memAlloc(bytes);
        allocations.add(p);
        MemorySegment host = arena.allocate(bytes);
        MemorySegment.copy(values, 0, host, FLOAT, 0, values.length);
        driver.memcpyHtoD(p, host, bytes);
        return p;
    }

    private float[] download(long pointer, int n, Arena arena) {
        MemorySegment host = arena.allocate(4L * n);
        driver.memcpyDtoH(host, pointer, 4L * n);
        return host.toArray(ValueLayout.JAVA_FLOAT);
    }

    private static String restInput(String name, String region, int n) {
        return "{\"name\":\"" + name + "\",\"datatype\":\"FP32\",\"shape\":[1," + n + "],\"parameters\":{\"shared_memory_region\":\"" + region
                + "\",\"shared_memory_byte_size\":" + 4L * n + "}}";
    }

    private static ModelInferRequest.InferInputTensor grpcInput(String name, String region, int n) {
        return ModelInferRequest.InferInputTensor.newBuilder().setName(name).setDatatype("FP32").addShape(1).addShape(n)
                .putAllParameters(region(region, 0, 4L * n)).build();
    }

    /** The parameters that put a tensor in shared-memory region {@code name} at {@code offset}, {@code size} bytes. */
    static Map<String, InferParameter> region(String name, long offset, long size) {
        return Map.of(SystemSharedMemory.REGION, InferParameter.newBuilder().setStringParam(name).build(),
                SystemSharedMemory.OFFSET, InferParameter.newBuilder().setInt64Param(offset).build(),
                SystemSharedMemory.BYTE_SIZE, InferParameter.newBuilder().setInt64Param(size).build());
    }

    private HttpResponse<String> post(HttpClient http, String path, String body) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create(rest + path)).timeout(TIMEOUT).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private void check(boolean ok, String what) {
        if (ok) {
            LOG.info("PASS {}", what);
        } else {
            failed++;
            LOG.error("FAIL {}", what);
        }
    }
}
