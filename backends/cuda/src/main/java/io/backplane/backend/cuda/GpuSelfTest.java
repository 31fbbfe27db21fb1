package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU self-test: runs the sample model {@code saxpy_cuda} through this backend on GPU 0 and
 * checks what CI cannot: results against a CPU reference (host and GPU-resident inputs, single
 * requests and batches), that device memory ({@code cuMemGetInfo}) returns to its baseline after
 * unload, over several load/unload cycles; and measures host↔device bandwidth (pinned and
 * pageable) and per-launch overhead (raw driver and through the backend). With
 * {@code --fault-test} it does only this instead: provokes a kernel fault, checks that the batch
 * fails with a named error and the instance reports failure, and reports whether a recreated
 * instance serves again (run it in its own process: the fault may poison the context for good).
 *
 * <p>Exit status: 0 when every check passed, 1 when one failed, 2 when there is no usable CUDA
 * driver or device (after printing what is missing and the error a model load gives).
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -cp 'lib/*' io.backplane.backend.cuda.GpuSelfTest
 *     [--model-dir models/saxpy_cuda] [--library libcuda.so.1] [--fault-test] [--quick]</pre>
 */
public final class GpuSelfTest {
    private static final Logger LOG = LoggerFactory.getLogger("gpu-self-test");
    private static final ValueLayout.OfFloat LE_FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final float A = 2.0f;
    private static final long MIB = 1024 * 1024;
    /** How far free device memory may differ from its baseline after unload before the check fails. */
    private static final long MEMORY_SLACK = 2 * MIB;

    private int passed;
    private int scale = 1; // --quick divides the measurement loops (CI runs the flow against a fake driver)
    private int failed;

    GpuSelfTest() {
    }

    public static void main(String[] args) {
        int status;
        try {
            status = new GpuSelfTest().run(args);
        } catch (Exception e) {
            LOG.error("GPU self-test crashed", e);
            status = 1;
        }
        Runtime.getRuntime().exit(status);
    }

    int run(String[] args) throws IOException {
        return run(args, null);
    }

    /** Runs against {@code given} instead of the library named by {@code --library} (tests pass a fake driver's status). */
    int run(String[] args, CudaLibrary.@Nullable Status given) throws IOException {
        Path modelDir = Path.of("models/saxpy_cuda");
        String library = CudaLibrary.DEFAULT_LIBRARY;
        boolean faultTest = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--model-dir" -> modelDir = Path.of(args[++i]);
                case "--library" -> library = args[++i];
                case "--fault-test" -> faultTest = true;
                case "--quick" -> scale = 20;
                default -> throw new IllegalArgumentException("unknown argument " + args[i]
                        + "; use --model-dir DIR, --library NAME, --fault-test, --quick");
            }
        }
        ModelConfig config = SimplePbtxt.parse(Files.readString(modelDir.resolve("config.pbtxt")));
        Standalone.Model modelContext = Standalone.Model.of(modelDir, 1, config);
        CudaLibrary.Status status = given != null ? given : CudaLibrary.load(library);
        if (!status.usable()) {
            LOG.error("no CUDA: {}", status.problem());
            try (CudaBackend backend = new CudaBackend(status, Map.of())) {
                LOG.info("the cuda backend started without a GPU, as it should");
                backend.loadModel(modelContext).close();
                LOG.error("loading {} succeeded without a usable driver, which is wrong", config.name());
            } catch (BackplaneException e) {
                LOG.error("loading {} fails with {}: {}", config.name(), e.code(), e.getMessage());
            }
            return 2;
        }
        if (faultTest) {
            faultTest(status, modelContext); // alone, in its own process: a kernel fault may poison the context for good
            LOG.info("GPU fault test: {} check(s) passed, {} failed", passed, failed);
            return failed == 0 ? 0 : 1;
        }
        CudaDriver d = status.requireDriver();
        int device = d.device(0);
        LOG.info("driver for CUDA {}, {} device(s); GPU 0: {}, compute capability {}.{}, {} MiB",
                CudaLibrary.versionString(status.driverVersion()), status.deviceCount(), d.deviceName(device),
                d.deviceAttribute(CudaDriver.ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                d.deviceAttribute(CudaDriver.ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), d.deviceTotalMemory(device) / MIB);

        // The self-test holds its own reference on the primary context, so that the context (and
        // its fixed overhead) lives across unloads and free memory can be compared with a baseline.
        long context = d.primaryContextRetain(device);
        try {
            long baseline = freeMemory(d, context);
            LOG.info("free device memory before loading: {} bytes", baseline);

            try (CudaBackend backend = new CudaBackend(status, Map.of())) {
                CudaModel model = backend.loadModel(modelContext);
                Standalone.Instance ictx = new Standalone.Instance(modelContext, 0, InstanceKind.GPU, 0);
                CudaInstance instance = model.createInstance(ictx);
                try {
                    correctness(instance);
                    gpuResidentInputs(d, context, instance);
                    throughput(instance);
                    rawLaunchOverhead(d, context, model.moduleOn(0).function());
                    bandwidth(d, context);
                    DeviceMemoryPool.Stats stats = backend.device(0).pool().stats();
                    LOG.info("pool on GPU 0 while loaded: {}", stats);
                } finally {
                    instance.close();
                    model.close();
                }
                check(backend.device(0) == null, "GPU 0's device context is released after the model closed");
                long after = freeMemory(d, context);
                check(Math.abs(baseline - after) <= MEMORY_SLACK, "free device memory after unload is back to baseline: before "
                        + baseline + ", after " + after + ", delta " + (baseline - after) + " bytes");

                for (int cycle = 0; cycle < 5; cycle++) {
                    CudaModel m = backend.loadModel(modelContext);
                    CudaInstance i = m.createInstance(new Standalone.Instance(modelContext, 0, InstanceKind.GPU, 0));
                    runSaxpy(i, new Random(cycle), List.of(4096, 100_000));
                    i.close();
                    m.close();
                }
                long afterCycles = freeMemory(d, context);
                check(Math.abs(baseline - afterCycles) <= MEMORY_SLACK, "free device memory after 5 load/run/unload cycles: before "
                        + baseline + ", after " + afterCycles + ", delta " + (baseline - afterCycles) + " bytes");
            }
        } finally {
            d.primaryContextRelease(device);
        }
        LOG.info("GPU self-test: {} check(s) passed, {} failed", passed, failed);
        return failed == 0 ? 0 : 1;
    }

    private void correctness(CudaInstance instance) {
        Random rnd = new Random(42);
        int[] sizes = {1, 7, 255, 256, 257, 1000, 65_537, 1 << 20};
        for (int n : sizes) {
            check(runSaxpy(instance, rnd, List.of(n)), "saxpy of 1 request of " + n + " element(s) matches the CPU reference");
        }
        check(runSaxpy(instance, rnd, List.of(3, 1, 500, 0, 4096, 77)), "a batch of 6 requests of different lengths (one empty) matches");
        List<Integer> big = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            big.add(1000 + i * 37);
        }
        check(runSaxpy(instance, rnd, big), "a full batch of 64 requests matches");
    }

    /** Runs one batch of requests with these lengths; true when every output equals fma(A, x, y). */
    private boolean runSaxpy(CudaInstance instance, Random rnd, List<Integer> lengths) {
        List<Standalone.Request> requests = new ArrayList<>();
        List<float[][]> data = new ArrayList<>();
        for (int n : lengths) {
            float[] x = randomFloats(rnd, n);
            float[] y = randomFloats(rnd, n);
            data.add(new float[][] {x, y});
            requests.add(new Standalone.Request(InferenceRequest.builder("saxpy_cuda")
                    .input(Tensor.ofFloats("X", new long[] {1, n}, x)).input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build()));
        }
        instance.execute(Standalone.Request.batch(requests));
        for (int r = 0; r < requests.size(); r++) {
            if (!matches(requests.get(r), data.get(r)[0], data.get(r)[1])) {
                return false;
            }
        }
        return true;
    }

    private static boolean matches(Standalone.Request request, float[] x, float[] y) {
        InferenceResponse response = request.response();
        if (response == null || response.isError()) {
            LOG.error("request {} got {}", request.id(), response);
            return false;
        }
        float[] out = response.output("OUT").toFloatArray();
        if (out.length != x.length) {
            LOG.error("request {}: {} outputs for {} inputs", request.id(), out.length, x.length);
            return false;
        }
        for (int i = 0; i < x.length; i++) {
            float expected = Math.fma(A, x[i], y[i]);
            if (Float.compare(out[i], expected) != 0 && Math.abs(out[i] - expected) > 1e-6f * Math.max(1f, Math.abs(expected))) {
                LOG.error("request {}: OUT[{}] = {} but 2*{}+{} = {}", request.id(), i, out[i], x[i], y[i], expected);
                return false;
            }
        }
        return true;
    }

    @SuppressWarnings("restricted")
    private void gpuResidentInputs(CudaDriver d, long context, CudaInstance instance) {
        Random rnd = new Random(7);
        int n = 10_000;
        float[] x = randomFloats(rnd, n);
        float[] y = randomFloats(rnd, n);
        long bytes = 4L * n;
        long stream;
        long devX;
        MemorySegment pinned;
        d.contextPush(context);
        try {
            stream = d.streamCreate();
            devX = d.memAlloc(bytes);
            pinned = d.memHostAlloc(bytes);
            MemorySegment.copy(x, 0, pinned, LE_FLOAT, 0, n);
            d.memcpyHtoDAsync(devX, pinned, bytes, stream);
            d.streamSynchronize(stream);
        } finally {
            d.contextPop();
        }
        try {
            Tensor gpuX = Tensor.of("X", DataType.FP32, new long[] {1, n}, MemorySegment.ofAddress(devX).reinterpret(bytes), MemoryType.GPU, 0);
            Standalone.Request one = new Standalone.Request(InferenceRequest.builder("saxpy_cuda").input(gpuX)
                    .input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build());
            instance.execute(Standalone.Request.batch(List.of(one)));
            check(matches(one, x, y), "a GPU-resident input (used in place) gives the CPU reference");

            List<Standalone.Request> batch = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                batch.add(new Standalone.Request(InferenceRequest.builder("saxpy_cuda").input(gpuX)
                        .input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build()));
            }
            instance.execute(Standalone.Request.batch(batch));
            check(batch.stream().allMatch(r -> matches(r, x, y)), "GPU-resident inputs in a batch (copied device to device) give the CPU reference");
        } finally {
            d.contextPush(context);
            try {
                d.memFree(devX);
                d.memFreeHost(pinned);
                d.streamDestroy(stream);
            } finally {
                d.contextPop();
            }
        }
    }

    private void throughput(CudaInstance instance) {
        Random rnd = new Random(3);
        for (int i = 0; i < 200 / scale; i++) {
            runSaxpy(instance, rnd, List.of(1));
        }
        int rounds = 2000 / scale;
        long t0 = System.nanoTime();
        for (int i = 0; i < rounds; i++) {
            runSaxpy(instance, rnd, List.of(1));
        }
        long perBatch = (System.nanoTime() - t0) / rounds;
        LOG.info("FIGURE backend execute, 1 request of 1 element (copy in, launch, copy out, sync, answer): {} us per batch",
                String.format("%.1f", perBatch / 1e3));
        List<Integer> lengths = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            lengths.add(16_384);
        }
        runSaxpy(instance, rnd, lengths);
        int bigRounds = Math.max(1, 50 / scale);
        t0 = System.nanoTime();
        for (int i = 0; i < bigRounds; i++) {
            runSaxpy(instance, rnd, lengths);
        }
        double seconds = (System.nanoTime() - t0) / 1e9 / bigRounds;
        LOG.info("FIGURE backend execute, 64 requests x 16384 fp32 elements: {} ms per batch, {} M elements/s (includes building the requests)",
                String.format("%.2f", seconds * 1e3), String.format("%.1f", 64 * 16_384 / seconds / 1e6));
    }

    private void rawLaunchOverhead(CudaDriver d, long context, long function) {
        d.contextPush(context);
        long stream = d.streamCreate();
        long x = d.memAlloc(4);
        long y = d.memAlloc(4);
        long out = d.memAlloc(4);
        try {
            List<KernelArg> args = List.of(new KernelArg.Int32(1), new KernelArg.Float32(A), new KernelArg.Pointer(x),
                    new KernelArg.Pointer(y), new KernelArg.Pointer(out));
            for (int i = 0; i < 500 / scale; i++) {
                d.launchKernel(function, 1, 32, stream, args);
            }
            d.streamSynchronize(stream);
            int n = 10_000 / scale;
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                d.launchKernel(function, 1, 32, stream, args);
            }
            d.streamSynchronize(stream);
            LOG.info("FIGURE raw cuLaunchKernel through FFM, {} launches queued then one sync: {} us per launch", n,
                    String.format("%.2f", (System.nanoTime() - t0) / 1e3 / n));
            n = 2000 / scale;
            t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                d.launchKernel(function, 1, 32, stream, args);
                d.streamSynchronize(stream);
            }
            LOG.info("FIGURE raw cuLaunchKernel + cuStreamSynchronize, each: {} us per launch",
                    String.format("%.2f", (System.nanoTime() - t0) / 1e3 / n));
            passed++;
        } finally {
            d.memFree(x);
            d.memFree(y);
            d.memFree(out);
            d.streamDestroy(stream);
            d.contextPop();
        }
    }

    private void bandwidth(CudaDriver d, long context) {
        long bytes = 64 * MIB / scale;
        int reps = Math.max(2, 20 / scale);
        d.contextPush(context);
        long stream = d.streamCreate();
        long dev = d.memAlloc(bytes);
        MemorySegment pinned = d.memHostAlloc(bytes);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pageable = arena.allocate(bytes, 4096);
            pinned.fill((byte) 1);
            pageable.fill((byte) 2);
            for (MemorySegment host : List.of(pinned, pageable)) {
                String kind = host == pinned ? "pinned" : "pageable";
                d.memcpyHtoDAsync(dev, host, bytes, stream);
                d.streamSynchronize(stream);
                long t0 = System.nanoTime();
                for (int i = 0; i < reps; i++) {
                    d.memcpyHtoDAsync(dev, host, bytes, stream);
                }
                d.streamSynchronize(stream);
                double h2d = bytes * (double) reps / ((System.nanoTime() - t0) / 1e9) / 1e9;
                t0 = System.nanoTime();
                for (int i = 0; i < reps; i++) {
                    d.memcpyDtoHAsync(host, dev, bytes, stream);
                }
                d.streamSynchronize(stream);
                double d2h = bytes * (double) reps / ((System.nanoTime() - t0) / 1e9) / 1e9;
                LOG.info("FIGURE bandwidth, {} host memory, {} MiB x {}: host->device {} GB/s, device->host {} GB/s", kind, bytes / MIB, reps,
                        String.format("%.2f", h2d), String.format("%.2f", d2h));
            }
            passed++;
        } finally {
            d.memFreeHost(pinned);
            d.memFree(dev);
            d.streamDestroy(stream);
            d.contextPop();
        }
    }

    /** Provokes CUDA_ERROR_ILLEGAL_ADDRESS and reports what happens; informational, since the driver may not allow recovery. */
    @SuppressWarnings("restricted")
    private void faultTest(CudaLibrary.Status status, Standalone.Model modelContext) throws IOException {
        LOG.info("fault test: passing a bogus device pointer as X");
        try (CudaBackend backend = new CudaBackend(status, Map.of())) {
            CudaModel model = backend.loadModel(modelContext);
            Standalone.Instance ictx = new Standalone.Instance(modelContext, 0, InstanceKind.GPU, 0);
            CudaInstance instance = model.createInstance(ictx);
            int n = 1 << 20;
            Tensor bogus = Tensor.of("X", DataType.FP32, new long[] {1, n}, MemorySegment.ofAddress(0x10).reinterpret(4L * n), MemoryType.GPU, 0);
            Standalone.Request r = new Standalone.Request(InferenceRequest.builder("saxpy_cuda").input(bogus)
                    .input(Tensor.ofFloats("Y", new long[] {1, n}, new float[n])).build());
            try {
                instance.execute(Standalone.Request.batch(List.of(r)));
                check(false, "a kernel reading a bogus pointer fails its batch");
            } catch (BackplaneException e) {
                check(true, "a kernel reading a bogus pointer fails its batch: " + e.getMessage());
            }
            check(!ictx.failures.isEmpty(), "the faulted instance reported failure (the core would recreate it)");
            check(!instance.isReady(), "the faulted instance reports not ready");
            instance.close();
            try {
                CudaInstance again = model.createInstance(new Standalone.Instance(modelContext, 1, InstanceKind.GPU, 0));
                boolean ok = runSaxpy(again, new Random(1), List.of(1000));
                LOG.info("fault test: after the context reset a new instance {}", ok ? "serves correctly" : "gives wrong results");
                again.close();
            } catch (RuntimeException e) {
                LOG.info("fault test: recreating the instance failed (the driver may require a process restart): {}", e.getMessage());
            }
            model.close();
        } catch (RuntimeException e) {
            LOG.info("fault test ended with: {}", e.getMessage());
        }
    }

    private static long freeMemory(CudaDriver d, long context) {
        d.contextPush(context);
        try {
            return d.memGetInfo().free();
        } finally {
            d.contextPop();
        }
    }

    private static float[] randomFloats(Random rnd, int n) {
        float[] f = new float[n];
        for (int i = 0; i < n; i++) {
            f[i] = rnd.nextFloat() * 200f - 100f;
        }
        return f;
    }

    private void check(boolean ok, String what) {
        if (ok) {
            passed++;
            LOG.info("PASS {}", what);
        } else {
            failed++;
            LOG.error("FAIL {}", what);
        }
    }
}
