package io.backplane.backend.cuda;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.HostListener;
import io.backplane.testkit.ModelHarness;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU self-test: serves the sample model {@code saxpy_cuda} with this backend on GPU 0 through
 * the real core ({@link BackplaneHost}, via the testkit's {@link ModelHarness}: the host's
 * {@code config.pbtxt} parser, scheduler and senders) and checks what CI cannot: results against a CPU reference (host and GPU-resident inputs, single
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
 * <p>It lives in the module's tests (it needs the core, which the backend itself never depends
 * on); {@code make-gpu-bundle.sh} packs the test classes and the core into the bundle.
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

    int run(String[] args) throws IOException, InterruptedException {
        return run(args, null);
    }

    /** Runs against {@code given} instead of the library named by {@code --library} (tests pass a fake driver's status). */
    int run(String[] args, CudaLibrary.@Nullable Status given) throws IOException, InterruptedException {
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
        CudaLibrary.Status status = given != null ? given : CudaLibrary.load(library);
        BackendFactory factory = factory(status);
        if (!status.usable()) {
            LOG.error("no CUDA: {}", status.problem());
            try (ModelHarness h = harness(factory, modelDir).start()) {
                LOG.error("loading {} succeeded without a usable driver, which is wrong", h.modelName());
            } catch (BackplaneException e) {
                LOG.info("the cuda backend started without a GPU, as it should");
                LOG.error("loading the model fails with {}: {}", e.code(), e.getMessage());
            }
            return 2;
        }
        if (faultTest) {
            faultTest(factory, modelDir); // alone, in its own process: a kernel fault may poison the context for good
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

            try (ModelHarness h = harness(factory, modelDir).start()) {
                CudaBackend backend = h.backend(CudaBackend.class);
                correctness(h);
                gpuResidentInputs(d, context, h);
                throughput(h);
                rawLaunchOverhead(d, context, h.model(CudaModel.class).moduleOn(0).function());
                bandwidth(d, context);
                DeviceMemoryPool.Stats stats = backend.device(0).pool().stats();
                LOG.info("pool on GPU 0 while loaded: {}", stats);
                h.unload();
                check(backend.device(0) == null, "GPU 0's device context is released after the model unloaded");
                long after = freeMemory(d, context);
                check(Math.abs(baseline - after) <= MEMORY_SLACK, "free device memory after unload is back to baseline: before "
                        + baseline + ", after " + after + ", delta " + (baseline - after) + " bytes");

                for (int cycle = 0; cycle < 5; cycle++) {
                    h.load();
                    runSaxpy(h, new Random(cycle), List.of(4096, 100_000));
                    h.unload();
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

    /** The cuda backend over {@code status} (the real driver, or a test's fake one), as the host sees a backend. */
    private static BackendFactory factory(CudaLibrary.Status status) {
        return new BackendFactory() {
            @Override
            public String name() {
                return CudaBackendFactory.NAME;
            }

            @Override
            public Backend create(BackendContext context) {
                return new CudaBackend(status, context.options());
            }
        };
    }

    /** The model folder through the host's parser, served with exact batches (a batch of N requests is one execute). */
    private static ModelHarness.Builder harness(BackendFactory factory, Path modelDir) {
        return ModelHarness.builder(factory).modelFolder(modelDir).exactBatches().answerTimeout(Duration.ofSeconds(120));
    }

    private void correctness(ModelHarness h) throws InterruptedException {
        Random rnd = new Random(42);
        int[] sizes = {1, 7, 255, 256, 257, 1000, 65_537, 1 << 20};
        for (int n : sizes) {
            check(runSaxpy(h, rnd, List.of(n)), "saxpy of 1 request of " + n + " element(s) matches the CPU reference");
        }
        check(runSaxpy(h, rnd, List.of(3, 1, 500, 0, 4096, 77)), "a batch of 6 requests of different lengths (one empty) matches");
        List<Integer> big = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            big.add(1000 + i * 37);
        }
        check(runSaxpy(h, rnd, big), "a full batch of 64 requests matches");
    }

    /** Runs one batch of requests with these lengths through the core; true when every output equals fma(A, x, y). */
    private boolean runSaxpy(ModelHarness h, Random rnd, List<Integer> lengths) throws InterruptedException {
        List<InferenceRequest> requests = new ArrayList<>();
        List<float[][]> data = new ArrayList<>();
        for (int n : lengths) {
            float[] x = randomFloats(rnd, n);
            float[] y = randomFloats(rnd, n);
            data.add(new float[][] {x, y});
            requests.add(InferenceRequest.builder("saxpy_cuda")
                    .input(Tensor.ofFloats("X", new long[] {1, n}, x)).input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build());
        }
        List<InferenceResponse> responses = h.run(requests.toArray(InferenceRequest[]::new));
        for (int r = 0; r < responses.size(); r++) {
            if (!matches(r, responses.get(r), data.get(r)[0], data.get(r)[1])) {
                return false;
            }
        }
        return true;
    }

    private static boolean matches(int request, InferenceResponse response, float[] x, float[] y) {
        if (response.isError()) {
            LOG.error("request {} got {}", request, response);
            return false;
        }
        float[] out = response.output("OUT").toFloatArray();
        if (out.length != x.length) {
            LOG.error("request {}: {} outputs for {} inputs", request, out.length, x.length);
            return false;
        }
        for (int i = 0; i < x.length; i++) {
            float expected = Math.fma(A, x[i], y[i]);
            if (Float.compare(out[i], expected) != 0 && Math.abs(out[i] - expected) > 1e-6f * Math.max(1f, Math.abs(expected))) {
                LOG.error("request {}: OUT[{}] = {} but 2*{}+{} = {}", request, i, out[i], x[i], y[i], expected);
                return false;
            }
        }
        return true;
    }

    @SuppressWarnings("restricted")
    private void gpuResidentInputs(CudaDriver d, long context, ModelHarness h) throws InterruptedException {
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
            InferenceResponse one = h.infer(InferenceRequest.builder("saxpy_cuda").input(gpuX).input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build());
            check(matches(0, one, x, y), "a GPU-resident input (used in place) gives the CPU reference");

            InferenceRequest[] batch = new InferenceRequest[3];
            for (int i = 0; i < 3; i++) {
                batch[i] = InferenceRequest.builder("saxpy_cuda").input(gpuX).input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build();
            }
            List<InferenceResponse> answers = h.run(batch);
            boolean all = true;
            for (int i = 0; i < answers.size(); i++) {
                all &= matches(i, answers.get(i), x, y);
            }
            check(all, "GPU-resident inputs in a batch (copied device to device) give the CPU reference");
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

    private void throughput(ModelHarness h) throws InterruptedException {
        Random rnd = new Random(3);
        for (int i = 0; i < 200 / scale; i++) {
            runSaxpy(h, rnd, List.of(1));
        }
        int rounds = 2000 / scale;
        long t0 = System.nanoTime();
        for (int i = 0; i < rounds; i++) {
            runSaxpy(h, rnd, List.of(1));
        }
        long perBatch = (System.nanoTime() - t0) / rounds;
        LOG.info("FIGURE through the core, 1 request of 1 element (queue, execute: copy in, launch, copy out, sync; answer): {} us per request",
                String.format("%.1f", perBatch / 1e3));
        List<Integer> lengths = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            lengths.add(16_384);
        }
        runSaxpy(h, rnd, lengths);
        int bigRounds = Math.max(1, 50 / scale);
        t0 = System.nanoTime();
        for (int i = 0; i < bigRounds; i++) {
            runSaxpy(h, rnd, lengths);
        }
        double seconds = (System.nanoTime() - t0) / 1e9 / bigRounds;
        LOG.info("FIGURE through the core, one batch of 64 requests x 16384 fp32 elements: {} ms per batch, {} M elements/s (includes building the requests)",
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
    private void faultTest(BackendFactory factory, Path modelDir) {
        LOG.info("fault test: passing a bogus device pointer as X");
        List<String> restarts = new CopyOnWriteArrayList<>();
        HostListener listener = new HostListener() {
            @Override
            public void instanceRestarted(String model, long version, String instance) {
                restarts.add(instance);
            }
        };
        try (ModelHarness h = harness(factory, modelDir).configureHost(b -> b.listener(listener)).start()) {
            CudaInstance first = h.instance(CudaInstance.class);
            int n = 1 << 20;
            Tensor bogus = Tensor.of("X", DataType.FP32, new long[] {1, n}, MemorySegment.ofAddress(0x10).reinterpret(4L * n), MemoryType.GPU, 0);
            InferenceResponse r = h.infer(InferenceRequest.builder("saxpy_cuda").input(bogus).input(Tensor.ofFloats("Y", new long[] {1, n}, new float[n]))
                    .build());
            check(r.isError(), "a kernel reading a bogus pointer fails its request" + (r.isError() ? ": " + r.error().getMessage() : ""));
            check(!first.isReady(), "the faulted instance reports not ready");
            try {
                h.awaitReady();
                check(!restarts.isEmpty(), "the faulted instance reported failure and the core replaced it: " + restarts);
                boolean ok = runSaxpy(h, new Random(1), List.of(1000));
                LOG.info("fault test: after the context reset the replacement instance {}", ok ? "serves correctly" : "gives wrong results");
            } catch (AssertionError e) {
                LOG.info("fault test: the instance was not replaced (the driver may require a process restart): {}", e.getMessage());
            }
        } catch (RuntimeException | InterruptedException | AssertionError e) {
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
