package io.backplane.backend.cuda;

import static io.backplane.backend.cuda.Fixtures.assertSaxpy;
import static io.backplane.backend.cuda.Fixtures.floats;
import static io.backplane.backend.cuda.Fixtures.saxpyRequest;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The backend end to end against the in-memory driver: load, place, execute, fail, recover, unload. */
@SuppressWarnings("restricted")
class CudaBackendTest {
    private FakeCudaDriver driver;
    private CudaBackend backend;
    @TempDir
    Path temp;

    @BeforeEach
    void start() throws Exception {
        driver = Fixtures.fake(2);
        backend = Fixtures.backend(driver);
    }

    @AfterEach
    void noLeaks() throws Exception {
        backend.close();
        assertEquals(0, driver.leakedAtRelease(), "allocations left for the context release to reclaim");
        assertEquals(0, driver.liveDeviceAllocations(), "device allocations left");
        assertEquals(0, driver.livePinned(), "pinned allocations left");
        assertEquals(0, driver.liveStreams(), "streams left");
        assertEquals(0, driver.liveModules(), "modules left");
        assertEquals(0, driver.retainCount(0) + driver.retainCount(1), "primary contexts still retained");
        assertEquals(0, driver.contextDepth(), "a context is still current on the test thread");
        driver.close();
    }

    private CudaInstance instance(CudaModel model, int index, int gpu) {
        return model.createInstance(new Standalone.Instance(model.context(), index, InstanceKind.GPU, gpu));
    }

    @Test
    void factory_isRegisteredAsCuda() throws Exception {
        List<String> names = ServiceLoader.load(BackendFactory.class).stream().map(p -> p.get().name()).toList();
        assertTrue(names.contains("cuda"), names.toString());
    }

    @Test
    void factory_withoutDriver_backendStarts_andGpuModelFailsNamingWhatIsMissing() throws Exception {
        try (var b = new CudaBackendFactory().create(new Standalone.Backend("cuda", Map.of("library", "libcuda-missing-in-ci.so.1"), temp))) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> b.loadModel(Fixtures.sampleModel()));
            assertEquals(ErrorCode.UNAVAILABLE, e.code());
            assertTrue(e.getMessage().startsWith("model 'saxpy_cuda' version 1 needs a GPU, but the CUDA driver library "
                    + "libcuda-missing-in-ci.so.1 could not be loaded"), e.getMessage());
        }
    }

    @Test
    void factory_defaultLibraryOnThisMachine_eitherWorksOrSaysWhy() throws Exception {
        CudaLibrary.Status s = CudaLibrary.load(CudaLibrary.DEFAULT_LIBRARY);
        try (var b = new CudaBackendFactory().create(new Standalone.Backend("cuda", Map.of(), temp))) {
            if (!s.usable()) {
                BackplaneException e = assertThrows(BackplaneException.class, () -> b.loadModel(Fixtures.sampleModel()));
                assertTrue(e.getMessage().contains("needs a GPU, but") && e.getMessage().contains(s.problem()), e.getMessage());
            }
        }
    }

    @Test
    void execute_singleRequest_matchesReference() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        float[] x = floats(1000, 1);
        float[] y = floats(1000, 2);
        Standalone.Request r = saxpyRequest(x, y);
        instance.execute(List.of(r));
        assertSaxpy(r, x, y);
        assertEquals(1, driver.launches);
        instance.close();
        model.close();
    }

    @Test
    void execute_batchOfDifferentLengths_isOneLaunch_andEachGetsItsOwnSlice() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        int[] lengths = {3, 0, 1, 513, 40};
        List<Standalone.Request> batch = new ArrayList<>();
        List<float[][]> data = new ArrayList<>();
        for (int i = 0; i < lengths.length; i++) {
            float[] x = floats(lengths[i], 10 + i);
            float[] y = floats(lengths[i], 20 + i);
            data.add(new float[][] {x, y});
            batch.add(saxpyRequest(x, y));
        }
        instance.execute(Standalone.Request.batch(batch));
        for (int i = 0; i < lengths.length; i++) {
            assertSaxpy(batch.get(i), data.get(i)[0], data.get(i)[1]);
            assertEquals(List.of(1L, (long) lengths[i]), java.util.Arrays.stream(batch.get(i).response().output("OUT").shape()).boxed().toList());
        }
        assertEquals(1, driver.launches, "one launch per batch");
        instance.close();
        model.close();
    }

    @Test
    void execute_allEmpty_answersWithoutLaunching() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        Standalone.Request r = saxpyRequest(new float[0], new float[0]);
        instance.execute(List.of(r));
        assertSaxpy(r, new float[0], new float[0]);
        assertEquals(0, driver.launches);
        instance.close();
        model.close();
    }

    @Test
    void execute_gpuResidentInputs_singleUsedInPlace_batchCopiedOnDevice() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        float[] x = floats(300, 5);
        float[] y = floats(300, 6);
        DeviceContext dev = backend.device(0);
        DeviceMemoryPool.DeviceBuffer onGpu = dev.pool().allocate(4L * x.length, "test");
        MemorySegment.copy(x, 0, driver.deviceMemory(onGpu.pointer(), 4L * x.length), ValueLayout.JAVA_FLOAT_UNALIGNED, 0, x.length);
        Tensor gpuX = Tensor.of("X", DataType.FP32, new long[] {1, x.length},
                MemorySegment.ofAddress(onGpu.pointer()).reinterpret(4L * x.length), MemoryType.GPU, 0);
        Standalone.Request one = new Standalone.Request(InferenceRequest.builder("saxpy_cuda").input(gpuX)
                .input(Tensor.ofFloats("Y", new long[] {1, y.length}, y)).build());
        instance.execute(List.of(one));
        assertSaxpy(one, x, y);

        float[] x2 = floats(17, 7);
        float[] y2 = floats(17, 8);
        Standalone.Request mixedA = new Standalone.Request(InferenceRequest.builder("saxpy_cuda").input(gpuX)
                .input(Tensor.ofFloats("Y", new long[] {1, y.length}, y)).build());
        Standalone.Request mixedB = saxpyRequest(x2, y2);
        instance.execute(List.of(mixedB, mixedA));
        assertSaxpy(mixedA, x, y);
        assertSaxpy(mixedB, x2, y2);
        onGpu.close();
        instance.close();
        model.close();
    }

    @Test
    void execute_inputOnAnotherGpu_failsOnlyThatRequest() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        Tensor elsewhere = Tensor.of("X", DataType.FP32, new long[] {1, 4}, MemorySegment.ofAddress(0x1000).reinterpret(16), MemoryType.GPU, 1);
        Standalone.Request bad = new Standalone.Request(InferenceRequest.builder("saxpy_cuda").input(elsewhere)
                .input(Tensor.ofFloats("Y", new long[] {1, 4}, 1, 2, 3, 4)).build());
        float[] x = floats(4, 1);
        float[] y = floats(4, 2);
        Standalone.Request good = saxpyRequest(x, y);
        instance.execute(List.of(bad, good));
        assertEquals(ErrorCode.INVALID_ARGUMENT, bad.response().error().code());
        assertTrue(bad.response().error().getMessage().contains("is in the memory of GPU 1 but"), bad.response().error().getMessage());
        assertSaxpy(good, x, y);
        instance.close();
        model.close();
    }

    @Test
    void execute_cancelledAndMismatchedRequests_areAnsweredAlone() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        Standalone.Request cancelled = saxpyRequest(floats(8, 1), floats(8, 2));
        cancelled.cancel();
        Standalone.Request mismatched = new Standalone.Request(InferenceRequest.builder("saxpy_cuda")
                .input(Tensor.ofFloats("X", new long[] {1, 2}, 1, 2)).input(Tensor.ofFloats("Y", new long[] {1, 3}, 1, 2, 3)).build());
        float[] x = floats(9, 3);
        float[] y = floats(9, 4);
        Standalone.Request good = saxpyRequest(x, y);
        instance.execute(List.of(cancelled, mismatched, good));
        assertEquals(ErrorCode.CANCELLED, cancelled.response().error().code());
        assertTrue(mismatched.response().error().getMessage().contains("has shape [1, 3] but 'X' has [1, 2]"));
        assertSaxpy(good, x, y);
        instance.close();
        model.close();
    }

    @Test
    void pool_accountsBuffers_reusesThemAcrossBatches_andGrowsWhenNeeded() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        DeviceMemoryPool pool = backend.device(0).pool();
        instance.execute(List.of(saxpyRequest(floats(100, 1), floats(100, 2))));
        DeviceMemoryPool.Stats s1 = pool.stats();
        assertEquals(3 * 400, s1.deviceBytes(), "X, Y and OUT buffers");
        assertEquals(3 * 400, driver.deviceBytesInUse(), "the pool's count is the driver's");
        assertEquals(4, s1.liveBuffers(), "three device buffers and one pinned staging buffer");
        assertEquals(3 * 400, s1.pinnedBytes());
        instance.execute(List.of(saxpyRequest(floats(50, 1), floats(50, 2))));
        assertEquals(s1.allocations(), pool.stats().allocations(), "a smaller batch reuses the buffers");
        instance.execute(List.of(saxpyRequest(floats(1000, 1), floats(1000, 2))));
        DeviceMemoryPool.Stats s3 = pool.stats();
        assertEquals(3 * 4000, s3.deviceBytes());
        assertEquals(3 * 4000, s3.peakDeviceBytes());
        assertEquals(s3.allocations() - s3.frees(), s3.liveBuffers());
        assertEquals(3 * 4000, pool.deviceBytesOwnedBy("model 'saxpy_cuda' version 1 instance saxpy_cuda_0"));
        instance.close();
        assertEquals(new DeviceMemoryPool.Stats(0, 3 * 4000, 0, 0, s3.allocations(), s3.allocations()), pool.stats());
        model.close();
        assertNull(backend.device(0), "the last model released GPU 0");
    }

    @Test
    void memoryLimit_exceeded_failsTheBatchWithResourceExhausted_andSmallerBatchesStillRun() throws Exception {
        backend.close();
        backend = new CudaBackend(Fixtures.usable(driver), Map.of("memory_limit_bytes", "4096"));
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> instance.execute(List.of(saxpyRequest(floats(1000, 1), floats(1000, 2)))));
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
        assertTrue(e.getMessage().contains("memory_limit_bytes is 4096"), e.getMessage());
        float[] x = floats(100, 1);
        float[] y = floats(100, 2);
        Standalone.Request ok = saxpyRequest(x, y);
        instance.execute(List.of(ok));
        assertSaxpy(ok, x, y);
        instance.close();
        model.close();
    }

    @Test
    void launchError_notSticky_failsTheBatch_instanceKeepsServing() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        Standalone.Instance ictx = new Standalone.Instance(model.context(), 0, InstanceKind.GPU, 0);
        CudaInstance instance = model.createInstance(ictx);
        driver.failNext("cuLaunchKernel", 701); // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        BackplaneException e = assertThrows(BackplaneException.class, () -> instance.execute(List.of(saxpyRequest(floats(8, 1), floats(8, 2)))));
        assertTrue(e.getMessage().contains("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)"), e.getMessage());
        assertTrue(e.getMessage().contains("on GPU 0"), e.getMessage());
        assertTrue(ictx.failures.isEmpty(), "a non-sticky error does not recreate the instance");
        assertTrue(instance.isReady());
        float[] x = floats(8, 3);
        float[] y = floats(8, 4);
        Standalone.Request next = saxpyRequest(x, y);
        instance.execute(List.of(next));
        assertSaxpy(next, x, y);
        instance.close();
        model.close();
    }

    @Test
    void kernelFault_sticky_recreatesEveryInstanceOnThatGpu_otherGpusUnaffected() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().clearInstanceGroups()
                .instanceGroup(InstanceGroup.of("g", 2, InstanceKind.GPU, List.of(0, 1))).build();
        Standalone.Model context = Standalone.Model.of(Fixtures.SAMPLE, 1, config);
        CudaModel model = backend.loadModel(context);
        Standalone.Instance c0 = new Standalone.Instance(context, 0, InstanceKind.GPU, 0);
        Standalone.Instance c1 = new Standalone.Instance(context, 1, InstanceKind.GPU, 0);
        Standalone.Instance c2 = new Standalone.Instance(context, 2, InstanceKind.GPU, 1);
        CudaInstance i0 = model.createInstance(c0);
        CudaInstance i1 = model.createInstance(c1);
        CudaInstance i2 = model.createInstance(c2);

        driver.kernel("saxpy", (d, g, b, args) -> {
            throw CudaErrors.exception("kernel", 700);
        });
        BackplaneException e = assertThrows(BackplaneException.class, () -> i0.execute(List.of(saxpyRequest(floats(8, 1), floats(8, 2)))));
        assertTrue(e.getMessage().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), e.getMessage());
        driver.kernel("saxpy", FakeCudaDriver.SAXPY);

        assertEquals(1, c0.failures.size(), "the faulting instance reports failure once");
        assertEquals(1, c1.failures.size(), "its neighbour on the same GPU too: the context is poisoned");
        assertTrue(c2.failures.isEmpty(), "GPU 1 is not affected");
        assertFalse(i0.isReady());
        assertFalse(i1.isReady());
        float[] x = floats(8, 5);
        float[] y = floats(8, 6);
        Standalone.Request onOtherGpu = saxpyRequest(x, y);
        i2.execute(List.of(onOtherGpu));
        assertSaxpy(onOtherGpu, x, y);
        BackplaneException stale = assertThrows(BackplaneException.class, () -> i1.execute(List.of(saxpyRequest(x, y))));
        assertEquals(ErrorCode.UNAVAILABLE, stale.code());

        BackplaneException early = assertThrows(BackplaneException.class,
                () -> model.createInstance(new Standalone.Instance(context, 3, InstanceKind.GPU, 0)));
        assertTrue(early.getMessage().contains("is recovering from CUDA_ERROR_ILLEGAL_ADDRESS; 2 failed instance(s)"), early.getMessage());

        i0.close(); // the core closes failed instances before it starts replacements
        i1.close();
        CudaInstance replacement = model.createInstance(new Standalone.Instance(context, 3, InstanceKind.GPU, 0));
        assertEquals(1, backend.device(0).generation(), "the primary context was reset once");
        Standalone.Request after = saxpyRequest(x, y);
        replacement.execute(List.of(after));
        assertSaxpy(after, x, y);
        replacement.close();
        i2.close();
        model.close();
    }

    @Test
    void placement_gpusList_loadsTheModuleOnEachListedGpu() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().clearInstanceGroups()
                .instanceGroup(InstanceGroup.of("g", 2, InstanceKind.GPU, List.of(1, 0))).build();
        CudaModel model = backend.loadModel(Standalone.Model.of(Fixtures.SAMPLE, 1, config));
        assertEquals(2, driver.liveModules());
        assertEquals(1, driver.retainCount(0));
        assertEquals(1, driver.retainCount(1));
        CudaModel second = backend.loadModel(Fixtures.sampleModel());
        assertEquals(1, driver.retainCount(0), "models share one primary context per GPU");
        assertEquals(2, backend.device(0).references());
        second.close();
        model.close();
    }

    @Test
    void placement_kindGpuWithoutList_loadsOnGpu0_andOnAnotherGpuWhenAnInstanceLandsThere() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().clearInstanceGroups()
                .instanceGroup(InstanceGroup.of("g", 1, InstanceKind.GPU, List.of())).build();
        CudaModel model = backend.loadModel(Standalone.Model.of(Fixtures.SAMPLE, 1, config));
        assertEquals(1, driver.liveModules(), "the core places a group without gpus on GPU 0");
        CudaInstance onGpu1 = instance(model, 0, 1);
        assertEquals(2, driver.liveModules());
        assertEquals(1, driver.retainCount(1));
        onGpu1.close();
        model.close();
    }

    @Test
    void placement_gpuOutOfRange_isAClearLoadError() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().clearInstanceGroups()
                .instanceGroup(InstanceGroup.of("big", 1, InstanceKind.GPU, List.of(0, 5))).build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Standalone.Model.of(Fixtures.SAMPLE, 1, config)));
        assertEquals("model 'saxpy_cuda' version 1: instance_group 'big' asks for GPU 5 but the CUDA driver sees 2 device(s) (0..1);"
                + " check gpus: [...] and CUDA_VISIBLE_DEVICES", e.getMessage());
    }

    @Test
    void load_decoupledModel_isUnsupported() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().decoupled(true).build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Standalone.Model.of(Fixtures.SAMPLE, 1, config)));
        assertEquals(ErrorCode.UNSUPPORTED, e.code());
        assertTrue(e.getMessage().contains("is decoupled, but the cuda backend answers each request with exactly one response"), e.getMessage());
    }

    @Test
    void placement_kindCpu_isRejected() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().clearInstanceGroups()
                .instanceGroup(InstanceGroup.of("cpu", 1, InstanceKind.CPU, List.of())).build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Standalone.Model.of(Fixtures.SAMPLE, 1, config)));
        assertTrue(e.getMessage().contains("is KIND_CPU, but the cuda backend runs on GPUs only"), e.getMessage());
    }

    @Test
    void load_ptxNewerThanTheDriver_isAClearError() throws IOException {
        String ptx = Files.readString(Fixtures.SAMPLE.resolve("1/saxpy.ptx")).replace(".version 7.0", ".version 9.0");
        Standalone.Model m = Fixtures.modelIn(temp, Fixtures.sampleConfig(), ptx);
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(m));
        assertEquals("model 'saxpy_cuda' version 1: saxpy.ptx is PTX ISA 9.0, which needs a driver for CUDA 13.0 or newer, but this"
                + " driver supports CUDA 12.8; regenerate the PTX with an older ISA .version (see gen-ptx.sh) or update the NVIDIA driver",
                e.getMessage());
    }

    @Test
    void load_argumentsDisagreeWithThePtxEntry_isAClearError() throws IOException {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().parameter("kernel_args", "count:int64, fp32:2, input:X, input:Y, output:OUT").build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Fixtures.modelIn(temp, config, null)));
        assertTrue(e.getMessage().contains("kernel 'saxpy' in saxpy.ptx takes 5 parameter(s) of sizes [4, 4, 8, 8, 8] bytes, but kernel_args"
                + " passes 5 of sizes [8, 4, 8, 8, 8]"), e.getMessage());
    }

    @Test
    void load_kernelNotInPtx_listsTheEntries() throws IOException {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().parameter("kernel", "daxpy").build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Fixtures.modelIn(temp, config, null)));
        assertTrue(e.getMessage().contains("saxpy.ptx has no kernel entry 'daxpy'; its entries are [saxpy]"), e.getMessage());
    }

    @Test
    void load_moduleFileMissing_namesThePath() throws Exception {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().parameter("module_file", "absent.ptx").build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Standalone.Model.of(Fixtures.SAMPLE, 1, config)));
        assertTrue(e.getMessage().contains("CUDA module " + Fixtures.SAMPLE.resolve("1/absent.ptx") + " does not exist"), e.getMessage());
    }

    @Test
    void load_blockSizeAboveTheKernelsLimit_failsAndReleasesTheGpu() throws Exception {
        driver.functionMaxThreads(128);
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Fixtures.sampleModel()));
        assertTrue(e.getMessage().contains("block_size 256 exceeds the 128 threads per block kernel 'saxpy' allows on GPU 0"), e.getMessage());
        assertEquals(0, driver.retainCount(0));
        assertEquals(0, driver.liveModules());
    }

    @Test
    void load_moduleRejectedByTheDriver_namesTheGpuAndResult() throws Exception {
        driver.failNext("cuModuleLoadDataEx", 218);
        BackplaneException e = assertThrows(BackplaneException.class, () -> backend.loadModel(Fixtures.sampleModel()));
        assertTrue(e.getMessage().contains("loading saxpy.ptx (kernel 'saxpy') on GPU 0 (Fake GPU 0) failed: cuModuleLoadDataEx failed:"
                + " CUDA_ERROR_INVALID_PTX (218)"), e.getMessage());
        assertEquals(0, driver.retainCount(0));
    }

    @Test
    void close_withModelStillOpen_freesEverything() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        instance.execute(List.of(saxpyRequest(floats(64, 1), floats(64, 2))));
        backend.close(); // the leak path: @AfterEach checks the driver is clean
        BackplaneException e = assertThrows(BackplaneException.class, () -> instance.execute(List.of(saxpyRequest(floats(4, 1), floats(4, 2)))));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        instance.close();
        model.close();
    }

    /**
     * The core may close an instance whose execute it abandoned at the unload deadline while that
     * execute still runs on its worker thread: the buffers it uses must outlive it.
     */
    @Test
    void close_duringExecute_keepsTheBuffersUntilTheExecutionReturns() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        CudaInstance instance = instance(model, 0, 0);
        java.util.concurrent.CountDownLatch inKernel = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        driver.kernel("saxpy", (d, g, b, args) -> {
            inKernel.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            FakeCudaDriver.SAXPY.run(d, g, b, args);
        });
        float[] x = floats(64, 1);
        float[] y = floats(64, 2);
        Standalone.Request r = saxpyRequest(x, y);
        ExecutorService worker = Executors.newSingleThreadExecutor();
        try {
            Future<?> running = worker.submit(() -> {
                instance.execute(List.of(r));
                return null;
            });
            assertTrue(inKernel.await(10, TimeUnit.SECONDS));
            instance.close(); // abandoned: the kernel is still running
            assertEquals(3, driver.liveDeviceAllocations(), "the running kernel's buffers are not freed under it");
            assertFalse(instance.isReady());
            release.countDown();
            running.get(10, TimeUnit.SECONDS);
            assertSaxpy(r, x, y);
            assertEquals(0, driver.liveDeviceAllocations(), "freed when the execution returned");
            assertEquals(0, driver.livePinned());
            assertEquals(0, driver.liveStreams());
        } finally {
            worker.shutdownNow();
            assertTrue(worker.awaitTermination(10, TimeUnit.SECONDS));
        }
        BackplaneException e = assertThrows(BackplaneException.class, () -> instance.execute(List.of(saxpyRequest(x, y))));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        model.close();
    }

    @Test
    void execute_fromManyThreads_leavesNoContextCurrent_andEveryResultIsRight() throws Exception {
        CudaModel model = backend.loadModel(Fixtures.sampleModel());
        List<CudaInstance> instances = List.of(instance(model, 0, 0), instance(model, 1, 0), instance(model, 2, 1));
        ExecutorService pool = Executors.newFixedThreadPool(3);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (CudaInstance inst : instances) {
                futures.add(pool.submit(() -> {
                    for (int round = 0; round < 50; round++) {
                        float[] x = floats(round + 1, round);
                        float[] y = floats(round + 1, round + 1000);
                        Standalone.Request r = saxpyRequest(x, y);
                        inst.execute(List.of(r)); // one instance is never called concurrently (the core's rule)
                        assertSaxpy(r, x, y);
                        assertEquals(0, driver.contextDepth());
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                assertNotNull(f);
                f.get();
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        instances.forEach(CudaInstance::close);
        model.close();
    }
}
