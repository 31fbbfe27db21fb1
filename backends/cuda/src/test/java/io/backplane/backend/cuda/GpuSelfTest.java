package io.backplane.backend.cuda;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.grpc.GrpcFrontendFactory;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.InferenceService;
import io.backplane.testkit.ModelHarness;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU self-test: serves the sample model {@code saxpy_cuda} with this backend on GPU 0 through
 * the real core ({@link BackplaneHost}, via the testkit's {@link ModelHarness}: the host's
 * {@code config.pbtxt} parser, scheduler and senders) and checks what CI cannot: results against a CPU reference (host and GPU-resident inputs, single
 * requests and batches), that device memory ({@code cuMemGetInfo}) returns to its baseline after
 * unload, over several load/unload cycles; and measures host↔device bandwidth (pinned and
 * pageable) and per-launch overhead (raw driver and through the backend). Then, through a
 * {@link BackplaneHost} of its own: where {@code KIND_AUTO}, a config without
 * {@code instance_group}, {@code gpus: [0]} and a GPU id the driver does not see go; and Triton's
 * {@code cudasharedmemory} extension over the real REST and gRPC frontends, with
 * {@link CudaIpcClient} in a child process making real CUDA IPC handles. With
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
 *     [--model-dir models/saxpy_cuda] [--library libcuda.so.1] [--fault-test] [--quick] [--fake-driver]</pre>
 *
 * <p>{@code --fake-driver} runs it over the in-memory driver of the tests instead of libcuda: how
 * {@code make-gpu-bundle.sh} rehearses the bundle on a machine without a GPU.
 */
public final class GpuSelfTest {
    private static final Logger LOG = LoggerFactory.getLogger("gpu-self-test");
    private static final ValueLayout.OfFloat LE_FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final float A = 2.0f;
    private static final long MIB = 1024 * 1024;
    /** How far free device memory may differ from its baseline after unload before the check fails. */
    private static final long MEMORY_SLACK = 2 * MIB;

    private String library = CudaLibrary.DEFAULT_LIBRARY;
    private int passed;
    private int scale = 1; // --quick divides the measurement loops (CI runs the flow against a fake driver)
    private int failed;

    GpuSelfTest() {
    }

    public static void main(String[] args) {
        int status;
        try {
            List<String> rest = new ArrayList<>(List.of(args));
            if (rest.remove("--fake-driver")) {
                // the bundle's rehearsal on a machine without a GPU (make-gpu-bundle.sh): the whole flow
                // over the in-memory driver, in the bundle's runtime with the bundle's jars
                try (FakeCudaDriver fake = new FakeCudaDriver(12080, 1, 1L << 30).kernel("saxpy", FakeCudaDriver.SAXPY)) {
                    status = new GpuSelfTest().run(rest.toArray(String[]::new), CudaLibrary.probe("fake-libcuda", fake));
                    if (fake.liveDeviceAllocations() != 0 || fake.liveIpcMappings() != 0 || fake.retainCount(0) != 0) {
                        LOG.error("FAIL the fake driver has {} allocation(s), {} IPC mapping(s) and {} context reference(s) left",
                                fake.liveDeviceAllocations(), fake.liveIpcMappings(), fake.retainCount(0));
                        status = 1;
                    }
                }
            } else {
                status = new GpuSelfTest().run(args);
            }
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
            Path model = modelDir;
            step("placement", () -> placement(status, model));
            step("CUDA shared memory", () -> cudaSharedMemory(status, factory, model, given != null));
            long afterAll = settledFreeMemory(d, context, baseline);
            check(Math.abs(baseline - afterAll) <= MEMORY_SLACK, "free device memory after the placement and CUDA shared-memory steps: before "
                    + baseline + ", after " + afterAll + ", delta " + (baseline - afterAll) + " bytes");
        } finally {
            d.primaryContextRelease(device);
        }
        LOG.info("GPU self-test: {} check(s) passed, {} failed", passed, failed);
        return failed == 0 ? 0 : 1;
    }

    /** The cuda backend over {@code status} (the real driver, or a test's fake one), as the host sees a backend. */
    private static BackendFactory factory(CudaLibrary.Status status) {
        return factory(status, b -> { });
    }

    /**
     * The cuda backend over {@code status} with the real factory's capabilities (so the host places
     * KIND_AUTO instances as it would for {@link CudaBackendFactory}); {@code created} sees each backend made.
     */
    private static BackendFactory factory(CudaLibrary.Status status, Consumer<CudaBackend> created) {
        BackendCapabilities capabilities = new CudaBackendFactory().capabilities();
        return new BackendFactory() {
            @Override
            public String name() {
                return CudaBackendFactory.NAME;
            }

            @Override
            public BackendCapabilities capabilities() {
                return capabilities;
            }

            @Override
            public Backend create(BackendContext context) {
                CudaBackend b = new CudaBackend(status, context.options());
                created.accept(b);
                return b;
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
        return isSaxpy("request " + request, x, y, out);
    }

    /** Whether {@code out} is fma(A, x, y) element by element (within 1e-6 relative); logs the first element that is not. */
    static boolean isSaxpy(String what, float[] x, float[] y, float[] out) {
        for (int i = 0; i < x.length; i++) {
            float expected = Math.fma(A, x[i], y[i]);
            if (Float.compare(out[i], expected) != 0 && Math.abs(out[i] - expected) > 1e-6f * Math.max(1f, Math.abs(expected))) {
                LOG.error("{}: OUT[{}] = {} but 2*{}+{} = {}", what, i, out[i], x[i], y[i], expected);
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

    /**
     * Step 2, placement with the GPU present, through the real host: {@code KIND_AUTO}, a config
     * without {@code instance_group} and {@code KIND_GPU gpus: [0]} all land on GPU 0 and serve; a
     * group asking for a GPU the driver does not see is refused with a message naming it, and the
     * host serves on.
     */
    private void placement(CudaLibrary.Status status, Path modelDir) throws IOException, InterruptedException {
        LOG.info("== placement: KIND_AUTO, no instance_group, gpus: [0], and a GPU that does not exist");
        int missing = status.deviceCount();
        AtomicReference<CudaBackend> backend = new AtomicReference<>();
        BackendFactory capturing = factory(status, backend::set);
        Map<String, String> groups = new LinkedHashMap<>();
        groups.put("saxpy_auto", "instance_group [ { kind: KIND_AUTO count: 2 } ]");
        groups.put("saxpy_default", "");
        groups.put("saxpy_gpu0", "instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]");
        String absent = "saxpy_gpu" + missing;
        Path repo = Files.createTempDirectory("gpu-self-test-placement");
        try {
            for (Map.Entry<String, String> e : groups.entrySet()) {
                copyModel(modelDir, repo.resolve(e.getKey()), e.getValue());
            }
            copyModel(modelDir, repo.resolve(absent), "instance_group [ { kind: KIND_GPU count: 1 gpus: [ " + missing + " ] } ]");
            try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).backend(capturing)
                    .unloadTimeout(Duration.ofSeconds(60)).build()) {
                for (String name : groups.keySet()) {
                    try {
                        host.load(name);
                    } catch (BackplaneException e) {
                        check(false, name + " loads: " + e.getMessage());
                        continue;
                    }
                    List<InstanceGroup> placed = host.modelConfig(name, 1).instanceGroups();
                    boolean onGpu0 = !placed.isEmpty() && placed.stream().allMatch(g -> g.kind() == InstanceKind.GPU && (g.gpus().isEmpty() || g.gpus().equals(List.of(0))));
                    check(onGpu0 && backend.get() != null && backend.get().device(0) != null, name + " is placed on GPU 0: "
                            + placed.stream().map(g -> g.name() + " " + g.kind() + " x" + g.count() + " gpus " + g.gpus()).toList());
                    check(hostSaxpy(host, name, 4096), name + " answers 2*X+Y through the host");
                }
                try {
                    host.load(absent);
                    check(false, absent + " asks for GPU " + missing + " of " + missing + " device(s) yet loaded");
                } catch (BackplaneException e) {
                    check(e.getMessage().contains("asks for GPU " + missing) && e.getMessage().contains("CUDA_VISIBLE_DEVICES"),
                            "a group asking for GPU " + missing + ", which the driver does not see, is refused clearly: " + e.getMessage());
                }
                check(hostSaxpy(host, "saxpy_gpu0", 1000), "the host serves saxpy_gpu0 on after the refused load");
                for (String name : groups.keySet()) {
                    host.unload(name);
                }
                check(backend.get() == null || backend.get().device(0) == null, "GPU 0's context is released once every placed model unloaded");
            }
        } finally {
            deleteTree(repo);
        }
    }

    /**
     * Step 3, Triton's {@code cudasharedmemory} extension: the host serves saxpy_cuda through the
     * real REST and gRPC frontends sharing one registry (as {@code backplane serve} does), and
     * {@link CudaIpcClient} registers real CUDA IPC handles, infers and reads OUT from its own GPU
     * memory. On a GPU the client is a child process (a handle cannot be opened in the process that
     * made it); over a test's fake driver it runs in this process.
     */
    private void cudaSharedMemory(CudaLibrary.Status status, BackendFactory factory, Path modelDir, boolean clientInProcess) throws Exception {
        LOG.info("== CUDA shared memory: a client {} registers CUDA IPC handles over REST and gRPC", clientInProcess ? "in this process" : "in a child process");
        Path repo = Files.createTempDirectory("gpu-self-test-cudashm");
        CudaSharedMemoryRegistry registry = new CudaSharedMemoryRegistry(status.requireDriver());
        SystemSharedMemory shm = new SystemSharedMemory(registry);
        try {
            copyModel(modelDir, repo.resolve("saxpy_cuda"), null);
            try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).loadModel("saxpy_cuda").backend(factory).build()) {
                Map<String, String> options = Map.of("host", "127.0.0.1", "port", "0");
                Frontend http = new HttpFrontendFactory().create(new Frontends(host, options, shm));
                Frontend grpc = new GrpcFrontendFactory().create(new Frontends(host, options, shm));
                try {
                    http.start();
                    grpc.start();
                    String rest = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
                    String grpcTarget = grpc.endpoint().replaceFirst("^[a-z]+://", "");
                    int clientFailures = clientInProcess ? new CudaIpcClient(status.requireDriver(), rest, grpcTarget).run(4096 * scale)
                            : childClient(rest, grpcTarget);
                    check(clientFailures == 0, "the CUDA IPC client passed every check (" + (clientFailures < 0 ? "timed out" : "status " + clientFailures) + ")");
                    check(registry.status(null).isEmpty(), "no CUDA region is left registered after the client's unregisters");
                } finally {
                    grpc.close();
                    http.close();
                }
            }
        } finally {
            shm.close();
            deleteTree(repo);
        }
    }

    /** A step of the self-test that may throw. */
    private interface Step {
        void run() throws Exception;
    }

    /** Runs {@code step}; a crash counts as one failed check, and the steps after it still run. */
    private void step(String name, Step step) throws InterruptedException {
        try {
            step.run();
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception | AssertionError e) {
            LOG.error("the {} step crashed", name, e);
            check(false, "the " + name + " step ran to its end (it crashed: " + e + ")");
        }
    }

    /** The host's context for the frontends, sharing one shared-memory registry between them as {@code backplane serve} does. */
    record Frontends(InferenceService service, Map<String, String> options, SystemSharedMemory shm) implements FrontendContext {
        @Override
        public <T extends AutoCloseable> Shared<T> shared(Class<T> type, Supplier<T> create) {
            return new Shared<>(type.cast(shm), false);
        }
    }

    /** Runs {@link CudaIpcClient} in a child JVM like this one; its exit status, or -1 when it timed out. */
    int childClient(String rest, String grpcTarget) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), CudaIpcClient.class.getName(), "--rest", rest, "--grpc", grpcTarget,
                "--library", library));
        Process p = new ProcessBuilder(command).inheritIO().start();
        if (!p.waitFor(180, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            LOG.error("the CUDA IPC client did not finish within 180 s");
            return -1;
        }
        return p.exitValue();
    }

    /** One request of {@code n} elements to {@code model} through the host's API; true when OUT is 2*X+Y. */
    private static boolean hostSaxpy(BackplaneHost host, String model, int n) throws InterruptedException {
        Random rnd = new Random(n);
        float[] x = randomFloats(rnd, n);
        float[] y = randomFloats(rnd, n);
        try {
            InferenceResponse r = host.infer(InferenceRequest.builder(model).input(Tensor.ofFloats("X", new long[] {1, n}, x))
                    .input(Tensor.ofFloats("Y", new long[] {1, n}, y)).build()).get(120, TimeUnit.SECONDS);
            return matches(0, r, x, y);
        } catch (ExecutionException | TimeoutException e) {
            LOG.error("{}: {}", model, e.toString());
            return false;
        }
    }

    /** Copies the model folder {@code from} to {@code to}, renamed after {@code to}, with {@code groups} in place of its instance_group (null keeps it). */
    private static void copyModel(Path from, Path to, @Nullable String groups) throws IOException {
        try (Stream<Path> files = Files.walk(from)) {
            for (Path f : files.toList()) {
                Path target = to.resolve(from.relativize(f).toString());
                if (Files.isDirectory(f)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(f, target);
                }
            }
        }
        Path config = to.resolve("config.pbtxt");
        String text = Files.readString(config).replaceFirst("(?m)^name:\\s*\"[^\"]*\"", "name: \"" + to.getFileName() + "\"");
        if (groups != null) {
            Matcher m = Pattern.compile("(?s)instance_group\\s*\\[.*?\\n\\]").matcher(text);
            if (!m.find()) {
                throw new IOException(config + " has no instance_group [ ... ] block to replace");
            }
            text = text.substring(0, m.start()) + groups + text.substring(m.end());
        }
        Files.writeString(config, text);
    }

    static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }

    /**
     * Free device memory once it is back within the slack of {@code baseline}, or what it is after
     * 10 s: the child client's context goes with its process, which the driver may tear down a
     * moment after the process is reaped.
     */
    private static long settledFreeMemory(CudaDriver d, long context, long baseline) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        long free = freeMemory(d, context);
        while (Math.abs(baseline - free) > MEMORY_SLACK && System.nanoTime() < deadline) {
            Thread.sleep(100);
            free = freeMemory(d, context);
        }
        return free;
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
