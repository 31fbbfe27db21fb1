package io.backplane.backend.cuda;

import static io.backplane.backend.cuda.Fixtures.assertSaxpy;
import static io.backplane.backend.cuda.Fixtures.floats;
import static io.backplane.backend.cuda.Fixtures.saxpyRequest;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.HostListener;
import io.backplane.testkit.ExecuteDoor;
import io.backplane.testkit.ModelHarness;
import io.backplane.testkit.Reply;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The backend against the in-memory driver, served by the real core ({@link ModelHarness}):
 * load, place, execute, fail, recover, unload; white-box checks reach the backend's own objects.
 */
@SuppressWarnings("restricted")
class CudaBackendTest {
    private FakeCudaDriver driver;

    @BeforeEach
    void start() {
        driver = Fixtures.fake(2);
    }

    @AfterEach
    void noLeaks() {
        assertEquals(0, driver.leakedAtRelease(), "allocations left for the context release to reclaim");
        assertEquals(0, driver.liveDeviceAllocations(), "device allocations left");
        assertEquals(0, driver.livePinned(), "pinned allocations left");
        assertEquals(0, driver.liveStreams(), "streams left");
        assertEquals(0, driver.liveModules(), "modules left");
        assertEquals(0, driver.retainCount(0) + driver.retainCount(1), "primary contexts still retained");
        assertEquals(0, driver.contextDepth(), "a context is still current on the test thread");
        driver.close();
    }

    private static ModelConfig withGroups(InstanceGroup... groups) {
        ModelConfig.Builder b = Fixtures.sampleConfig().toBuilder().clearInstanceGroups();
        for (InstanceGroup g : groups) {
            b.instanceGroup(g);
        }
        return b.build();
    }

    private BackplaneException loadFails(ModelHarness.Builder harness) {
        return assertThrows(BackplaneException.class, () -> harness.start().close());
    }

    /** The core's context of an instance, moved to another GPU: an instance the core would place there. */
    private record OnDevice(InstanceContext core, int deviceId, int index) implements InstanceContext {
        @Override
        public String name() {
            return core.name() + "_on_gpu" + deviceId;
        }

        @Override
        public InstanceKind kind() {
            return InstanceKind.GPU;
        }

        @Override
        public ModelContext model() {
            return core.model();
        }

        @Override
        public void reportFailure(Throwable cause) {
            core.reportFailure(cause);
        }
    }

    @Test
    void factory_isRegisteredAsCuda() {
        List<String> names = ServiceLoader.load(BackendFactory.class).stream().map(p -> p.get().name()).toList();
        assertTrue(names.contains("cuda"), names.toString());
    }

    @Test
    void factory_withoutDriver_backendStarts_andGpuModelFailsNamingWhatIsMissing() {
        BackplaneException e = loadFails(ModelHarness.builder(new CudaBackendFactory()).modelFolder(Fixtures.SAMPLE)
                .backendOption("library", "libcuda-missing-in-ci.so.1"));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().startsWith("model 'saxpy_cuda' version 1 needs a GPU, but the CUDA driver library "
                + "libcuda-missing-in-ci.so.1 could not be loaded"), e.getMessage());
    }

    @Test
    void factory_defaultLibraryOnThisMachine_eitherWorksOrSaysWhy() throws Exception {
        CudaLibrary.Status s = CudaLibrary.load(CudaLibrary.DEFAULT_LIBRARY);
        ModelHarness.Builder b = ModelHarness.builder(new CudaBackendFactory()).modelFolder(Fixtures.SAMPLE);
        if (!s.usable()) {
            BackplaneException e = loadFails(b);
            assertTrue(e.getMessage().contains("needs a GPU, but") && e.getMessage().contains(s.problem()), e.getMessage());
        } else {
            try (ModelHarness h = b.start()) {
                float[] x = floats(100, 1);
                float[] y = floats(100, 2);
                assertSaxpy(h.infer(saxpyRequest(x, y)), x, y);
            }
        }
    }

    @Test
    void execute_singleRequest_matchesReference() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            float[] x = floats(1000, 1);
            float[] y = floats(1000, 2);
            Reply r = h.send(saxpyRequest(x, y));
            assertSaxpy(r.await(), x, y);
            assertEquals(1, r.responses().size());
            assertEquals(1, driver.launches);
        }
    }

    @Test
    void execute_batchOfDifferentLengths_isOneLaunch_andEachGetsItsOwnSlice() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            int[] lengths = {3, 0, 1, 513, 40};
            InferenceRequest[] batch = new InferenceRequest[lengths.length];
            List<float[][]> data = new ArrayList<>();
            for (int i = 0; i < lengths.length; i++) {
                float[] x = floats(lengths[i], 10 + i);
                float[] y = floats(lengths[i], 20 + i);
                data.add(new float[][] {x, y});
                batch[i] = saxpyRequest(x, y);
            }
            List<InferenceResponse> responses = h.run(batch);
            for (int i = 0; i < lengths.length; i++) {
                assertSaxpy(responses.get(i), data.get(i)[0], data.get(i)[1]);
                assertEquals(List.of(1L, (long) lengths[i]), java.util.Arrays.stream(responses.get(i).output("OUT").shape()).boxed().toList());
            }
            assertEquals(1, driver.launches, "one launch per batch");
        }
    }

    @Test
    void execute_allEmpty_answersWithoutLaunching() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            assertSaxpy(h.infer(saxpyRequest(new float[0], new float[0])), new float[0], new float[0]);
            assertEquals(0, driver.launches);
        }
    }

    @Test
    void execute_gpuResidentInputs_singleUsedInPlace_batchCopiedOnDevice() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            float[] x = floats(300, 5);
            float[] y = floats(300, 6);
            DeviceContext dev = h.backend(CudaBackend.class).device(0);
            try (DeviceMemoryPool.DeviceBuffer onGpu = dev.pool().allocate(4L * x.length, "test")) {
                MemorySegment.copy(x, 0, driver.deviceMemory(onGpu.pointer(), 4L * x.length), ValueLayout.JAVA_FLOAT_UNALIGNED, 0, x.length);
                Tensor gpuX = Tensor.of("X", DataType.FP32, new long[] {1, x.length},
                        MemorySegment.ofAddress(onGpu.pointer()).reinterpret(4L * x.length), MemoryType.GPU, 0);
                assertSaxpy(h.infer(InferenceRequest.builder("saxpy_cuda").input(gpuX).input(Tensor.ofFloats("Y", new long[] {1, y.length}, y))
                        .build()), x, y);

                float[] x2 = floats(17, 7);
                float[] y2 = floats(17, 8);
                List<InferenceResponse> mixed = h.run(saxpyRequest(x2, y2), InferenceRequest.builder("saxpy_cuda").input(gpuX)
                        .input(Tensor.ofFloats("Y", new long[] {1, y.length}, y)).build());
                assertSaxpy(mixed.get(0), x2, y2);
                assertSaxpy(mixed.get(1), x, y);
            }
        }
    }

    @Test
    void execute_inputOnAnotherGpu_failsOnlyThatRequest() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            Tensor elsewhere = Tensor.of("X", DataType.FP32, new long[] {1, 4}, MemorySegment.ofAddress(0x1000).reinterpret(16), MemoryType.GPU, 1);
            float[] x = floats(4, 1);
            float[] y = floats(4, 2);
            List<InferenceResponse> rs = h.run(InferenceRequest.builder("saxpy_cuda").input(elsewhere)
                    .input(Tensor.ofFloats("Y", new long[] {1, 4}, 1, 2, 3, 4)).build(), saxpyRequest(x, y));
            assertEquals(ErrorCode.INVALID_ARGUMENT, rs.get(0).error().code());
            assertTrue(rs.get(0).error().getMessage().contains("is in the memory of GPU 1 but"), rs.get(0).error().getMessage());
            assertSaxpy(rs.get(1), x, y);
        }
    }

    /** Held at the door of execute, the first request is cancelled: the backend answers it CANCELLED and runs the rest. */
    @Test
    void execute_cancelledAndMismatchedRequests_areAnsweredAlone() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            InferenceRequest mismatched = InferenceRequest.builder("saxpy_cuda")
                    .input(Tensor.ofFloats("X", new long[] {1, 2}, 1, 2)).input(Tensor.ofFloats("Y", new long[] {1, 3}, 1, 2, 3)).build();
            float[] x = floats(9, 3);
            float[] y = floats(9, 4);
            List<Reply> rs;
            try (ExecuteDoor door = h.holdExecute()) {
                rs = h.batch(saxpyRequest(floats(8, 1), floats(8, 2)), mismatched, saxpyRequest(x, y));
                door.awaitBatch();
                assertTrue(rs.get(0).cancel());
            }
            assertEquals(ErrorCode.CANCELLED, rs.get(0).await().error().code());
            assertTrue(rs.get(1).await().error().getMessage().contains("has shape [1, 3] but 'X' has [1, 2]"));
            assertSaxpy(rs.get(2).await(), x, y);
        }
    }

    @Test
    void pool_accountsBuffers_reusesThemAcrossBatches_andGrowsWhenNeeded() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            CudaBackend backend = h.backend(CudaBackend.class);
            DeviceMemoryPool pool = backend.device(0).pool();
            assertFalse(h.infer(saxpyRequest(floats(100, 1), floats(100, 2))).isError());
            DeviceMemoryPool.Stats s1 = pool.stats();
            assertEquals(3 * 400, s1.deviceBytes(), "X, Y and OUT buffers");
            assertEquals(3 * 400, driver.deviceBytesInUse(), "the pool's count is the driver's");
            assertEquals(4, s1.liveBuffers(), "three device buffers and one pinned staging buffer");
            assertEquals(3 * 400, s1.pinnedBytes());
            assertFalse(h.infer(saxpyRequest(floats(50, 1), floats(50, 2))).isError());
            assertEquals(s1.allocations(), pool.stats().allocations(), "a smaller batch reuses the buffers");
            assertFalse(h.infer(saxpyRequest(floats(1000, 1), floats(1000, 2))).isError());
            DeviceMemoryPool.Stats s3 = pool.stats();
            assertEquals(3 * 4000, s3.deviceBytes());
            assertEquals(3 * 4000, s3.peakDeviceBytes());
            assertEquals(s3.allocations() - s3.frees(), s3.liveBuffers());
            String owner = "model 'saxpy_cuda' version 1 instance " + h.instanceContext().name();
            assertEquals(3 * 4000, pool.deviceBytesOwnedBy(owner), owner);
            try (ExecuteDoor door = h.holdExecute()) {
                Reply later = h.send(saxpyRequest(floats(4, 1), floats(4, 2)));
                door.awaitBatch(); // handshake: the worker is at the door, so the last execute has returned
                h.instance(CudaInstance.class).close(); // white-box: the core closes it once more at unload
                assertEquals(new DeviceMemoryPool.Stats(0, 3 * 4000, 0, 0, s3.allocations(), s3.allocations()), pool.stats());
                door.open();
                assertEquals(ErrorCode.UNAVAILABLE, later.await().error().code(), "the closed instance refuses");
            }
            h.unload();
            assertNull(backend.device(0), "the last model released GPU 0");
        }
    }

    @Test
    void memoryLimit_exceeded_failsTheBatchWithResourceExhausted_andSmallerBatchesStillRun() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).backendOption("memory_limit_bytes", "4096").start()) {
            BackplaneException e = h.infer(saxpyRequest(floats(1000, 1), floats(1000, 2))).error();
            assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
            assertTrue(e.getMessage().contains("memory_limit_bytes is 4096"), e.getMessage());
            float[] x = floats(100, 1);
            float[] y = floats(100, 2);
            assertSaxpy(h.infer(saxpyRequest(x, y)), x, y);
        }
    }

    @Test
    void launchError_notSticky_failsTheBatch_instanceKeepsServing() throws Exception {
        List<String> restarts = new CopyOnWriteArrayList<>();
        try (ModelHarness h = Fixtures.harness(driver).configureHost(b -> b.listener(restartsInto(restarts))).start()) {
            driver.failNext("cuLaunchKernel", 701); // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
            BackplaneException e = h.infer(saxpyRequest(floats(8, 1), floats(8, 2))).error();
            assertTrue(e.getMessage().contains("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701)"), e.getMessage());
            assertTrue(e.getMessage().contains("on GPU 0"), e.getMessage());
            assertTrue(h.instance(CudaInstance.class).isReady());
            float[] x = floats(8, 3);
            float[] y = floats(8, 4);
            assertSaxpy(h.infer(saxpyRequest(x, y)), x, y);
            assertEquals(1, h.instancesCreated(), "a non-sticky error does not recreate the instance");
            assertEquals(List.of(), restarts);
        }
    }

    private static HostListener restartsInto(List<String> restarts) {
        return new HostListener() {
            @Override
            public void instanceRestarted(String model, long version, String instance) {
                restarts.add(instance);
            }
        };
    }

    /**
     * A kernel fault poisons GPU 0's context: both instances there report failure and the core
     * replaces them (the backend resets the context once, after both closed); the instance on
     * GPU 1 is not touched; afterwards every request is served.
     */
    @Test
    void kernelFault_sticky_recreatesEveryInstanceOnThatGpu_otherGpusUnaffected() throws Exception {
        ModelConfig config = withGroups(InstanceGroup.of("g0", 2, InstanceKind.GPU, List.of(0)), InstanceGroup.of("g1", 1, InstanceKind.GPU, List.of(1)));
        List<String> restarts = new CopyOnWriteArrayList<>();
        try (ModelHarness h = Fixtures.harness(driver, config).configureHost(b -> b.listener(restartsInto(restarts))).start()) {
            assertEquals(3, h.instancesCreated());
            driver.kernel("saxpy", (d, g, b, args) -> {
                if (d.currentOrdinal() == 0) {
                    throw CudaErrors.exception("kernel", 700);
                }
                FakeCudaDriver.SAXPY.run(d, g, b, args);
            });
            BackplaneException e = null;
            for (int i = 0; i < 100 && e == null; i++) { // until a request lands on an instance on GPU 0
                e = h.infer(saxpyRequest(floats(8, 1), floats(8, 2))).error();
            }
            assertTrue(e != null && e.getMessage().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), String.valueOf(e));
            driver.kernel("saxpy", FakeCudaDriver.SAXPY);
            io.backplane.testkit.Await.until(() -> restarts.size() >= 2 && h.instances(CudaInstance.class).stream().allMatch(CudaInstance::isReady),
                    java.time.Duration.ofSeconds(30), "both instances on GPU 0 to be replaced");
            assertEquals(List.of("g0_0", "g0_1"), restarts.stream().sorted().toList(), "the instances on GPU 0 were replaced, once each");
            assertEquals(1, h.backend(CudaBackend.class).device(0).generation(), "the primary context was reset once");
            assertEquals(0, h.backend(CudaBackend.class).device(1).generation(), "GPU 1 is not affected");
            for (int i = 0; i < 12; i++) {
                float[] x = floats(8, 5 + i);
                float[] y = floats(8, 6 + i);
                assertSaxpy(h.infer(saxpyRequest(x, y)), x, y);
            }
        }
    }

    @Test
    void placement_gpusList_loadsTheModuleOnEachListedGpu() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver, withGroups(InstanceGroup.of("g", 2, InstanceKind.GPU, List.of(1, 0)))).start()) {
            assertEquals(4, h.instancesCreated(), "count 2 on each listed GPU");
            assertEquals(2, driver.liveModules());
            assertEquals(1, driver.retainCount(0));
            assertEquals(1, driver.retainCount(1));
            Model second = h.backend(Backend.class).loadModel(h.modelContext()); // a second model, with the core's context
            assertEquals(1, driver.retainCount(0), "models share one primary context per GPU");
            assertEquals(2, h.backend(CudaBackend.class).device(0).references());
            second.close();
        }
    }

    @Test
    void placement_kindGpuWithoutList_loadsOnGpu0_andOnAnotherGpuWhenAnInstanceLandsThere() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver, withGroups(InstanceGroup.of("g", 1, InstanceKind.GPU, List.of()))).start()) {
            assertEquals(1, driver.liveModules(), "the core places a group without gpus on GPU 0");
            assertEquals(0, h.instanceContext().deviceId());
            CudaInstance onGpu1 = h.model(CudaModel.class).createInstance(new OnDevice(h.instanceContext(), 1, 1));
            assertEquals(2, driver.liveModules());
            assertEquals(1, driver.retainCount(1));
            onGpu1.close();
        }
    }

    @Test
    void placement_gpuOutOfRange_isAClearLoadError() {
        BackplaneException e = loadFails(Fixtures.harness(driver, withGroups(InstanceGroup.of("big", 1, InstanceKind.GPU, List.of(0, 5)))));
        assertEquals("model 'saxpy_cuda' version 1: instance_group 'big' asks for GPU 5 but the CUDA driver sees 2 device(s) (0..1);"
                + " check gpus: [...] and CUDA_VISIBLE_DEVICES", e.getMessage());
    }

    @Test
    void load_decoupledModel_isUnsupported() {
        BackplaneException e = loadFails(Fixtures.harness(driver, Fixtures.sampleConfig().toBuilder().decoupled(true).build()));
        assertEquals(ErrorCode.UNSUPPORTED, e.code());
        // the host refuses it from the factory's capabilities (decoupled(false)) before the backend sees it
        assertTrue(e.getMessage().contains("is decoupled, but backend 'cuda' answers each request with exactly one response"), e.getMessage());
        // a host that does not read capabilities (here: a factory declaring none) still gets the backend's own refusal
        BackendFactory bare = new BackendFactory() {
            @Override
            public String name() {
                return CudaBackendFactory.NAME;
            }

            @Override
            public Backend create(BackendContext context) {
                return new CudaBackend(Fixtures.usable(driver), context.options());
            }
        };
        BackplaneException own = loadFails(ModelHarness.builder(bare).model(Fixtures.sampleConfig().toBuilder().decoupled(true).build())
                .versionFilesFrom(Fixtures.SAMPLE.resolve("1")).exactBatches());
        assertEquals(ErrorCode.UNSUPPORTED, own.code());
        assertTrue(own.getMessage().contains("is decoupled, but the cuda backend answers each request with exactly one response"), own.getMessage());
    }

    @Test
    void placement_kindCpu_isRejected() {
        BackplaneException e = loadFails(Fixtures.harness(driver, withGroups(InstanceGroup.of("cpu", 1, InstanceKind.CPU, List.of()))));
        assertTrue(e.getMessage().contains("is KIND_CPU, but the cuda backend runs on GPUs only"), e.getMessage());
    }

    @Test
    void load_ptxNewerThanTheDriver_isAClearError() throws Exception {
        String ptx = Files.readString(Fixtures.SAMPLE.resolve("1/saxpy.ptx")).replace(".version 7.0", ".version 9.0");
        BackplaneException e = loadFails(Fixtures.harness(driver).versionFile("saxpy.ptx", ptx));
        assertEquals("model 'saxpy_cuda' version 1: saxpy.ptx is PTX ISA 9.0, which needs a driver for CUDA 13.0 or newer, but this"
                + " driver supports CUDA 12.8; regenerate the PTX with an older ISA .version (see gen-ptx.sh) or update the NVIDIA driver",
                e.getMessage());
    }

    @Test
    void load_argumentsDisagreeWithThePtxEntry_isAClearError() {
        ModelConfig config = Fixtures.sampleConfig().toBuilder().parameter("kernel_args", "count:int64, fp32:2, input:X, input:Y, output:OUT").build();
        BackplaneException e = loadFails(Fixtures.harness(driver, config));
        assertTrue(e.getMessage().contains("kernel 'saxpy' in saxpy.ptx takes 5 parameter(s) of sizes [4, 4, 8, 8, 8] bytes, but kernel_args"
                + " passes 5 of sizes [8, 4, 8, 8, 8]"), e.getMessage());
    }

    @Test
    void load_kernelNotInPtx_listsTheEntries() {
        BackplaneException e = loadFails(Fixtures.harness(driver, Fixtures.sampleConfig().toBuilder().parameter("kernel", "daxpy").build()));
        assertTrue(e.getMessage().contains("saxpy.ptx has no kernel entry 'daxpy'; its entries are [saxpy]"), e.getMessage());
    }

    @Test
    void load_moduleFileMissing_namesThePath() {
        BackplaneException e = loadFails(Fixtures.harness(driver, Fixtures.sampleConfig().toBuilder().parameter("module_file", "absent.ptx").build()));
        assertTrue(e.getMessage().contains("CUDA module ") && e.getMessage().contains("saxpy_cuda/1/absent.ptx does not exist"), e.getMessage());
    }

    @Test
    void load_blockSizeAboveTheKernelsLimit_failsAndReleasesTheGpu() {
        driver.functionMaxThreads(128);
        BackplaneException e = loadFails(Fixtures.harness(driver));
        assertTrue(e.getMessage().contains("block_size 256 exceeds the 128 threads per block kernel 'saxpy' allows on GPU 0"), e.getMessage());
        assertEquals(0, driver.retainCount(0));
        assertEquals(0, driver.liveModules());
    }

    @Test
    void load_moduleRejectedByTheDriver_namesTheGpuAndResult() {
        driver.failNext("cuModuleLoadDataEx", 218);
        BackplaneException e = loadFails(Fixtures.harness(driver));
        assertTrue(e.getMessage().contains("loading saxpy.ptx (kernel 'saxpy') on GPU 0 (Fake GPU 0) failed: cuModuleLoadDataEx failed:"
                + " CUDA_ERROR_INVALID_PTX (218)"), e.getMessage());
        assertEquals(0, driver.retainCount(0));
    }

    /** The leak path: the backend closes while its model is still loaded; it frees everything, and the instance refuses to run. */
    @Test
    void close_withModelStillOpen_freesEverything() throws Exception {
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            assertFalse(h.infer(saxpyRequest(floats(64, 1), floats(64, 2))).isError());
            try (ExecuteDoor door = h.holdExecute()) {
                Reply later = h.send(saxpyRequest(floats(4, 1), floats(4, 2)));
                door.awaitBatch(); // handshake: the worker is at the door, so the first execute has returned
                h.backend(CudaBackend.class).close(); // white-box; @AfterEach checks the driver is clean
                assertEquals(0, driver.liveDeviceAllocations());
                door.open();
                BackplaneException e = later.await().error();
                assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
            }
        }
    }

    /**
     * The core may close an instance whose execute it abandoned at the unload deadline while that
     * execute still runs on its worker thread: the buffers it uses must outlive it.
     */
    @Test
    void close_duringExecute_keepsTheBuffersUntilTheExecutionReturns() throws Exception {
        CountDownLatch inKernel = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        driver.kernel("saxpy", (d, g, b, args) -> {
            inKernel.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            FakeCudaDriver.SAXPY.run(d, g, b, args);
        });
        try (ModelHarness h = Fixtures.harness(driver).start()) {
            CudaInstance instance = h.instance(CudaInstance.class);
            float[] x = floats(64, 1);
            float[] y = floats(64, 2);
            Reply r = h.send(saxpyRequest(x, y));
            assertTrue(inKernel.await(30, TimeUnit.SECONDS), "the kernel did not start");
            instance.close(); // abandoned: the kernel is still running on the core's worker
            assertEquals(3, driver.liveDeviceAllocations(), "the running kernel's buffers are not freed under it");
            assertFalse(instance.isReady());
            release.countDown();
            assertSaxpy(r.await(), x, y);
            BackplaneException e = h.infer(saxpyRequest(x, y)).error(); // the worker took it: the first execute has returned
            assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
            assertEquals(0, driver.liveDeviceAllocations(), "freed when the execution returned");
            assertEquals(0, driver.livePinned());
            assertEquals(0, driver.liveStreams());
        }
    }

    /**
     * Three instances on two GPUs serve concurrent callers; every launch finds exactly the one
     * context its execute pushed current (none leaked by an earlier execute on that worker).
     */
    @Test
    void execute_fromManyThreads_leavesNoContextCurrent_andEveryResultIsRight() throws Exception {
        List<Integer> depths = new CopyOnWriteArrayList<>();
        driver.kernel("saxpy", (d, g, b, args) -> {
            depths.add(d.contextDepth());
            FakeCudaDriver.SAXPY.run(d, g, b, args);
        });
        ModelConfig config = withGroups(InstanceGroup.of("g0", 2, InstanceKind.GPU, List.of(0)), InstanceGroup.of("g1", 1, InstanceKind.GPU, List.of(1)));
        try (ModelHarness h = Fixtures.harness(driver, config).start()) {
            List<Thread> callers = new ArrayList<>();
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            for (int t = 0; t < 3; t++) {
                int caller = t;
                callers.add(Thread.ofPlatform().name("caller-" + t).start(() -> {
                    try {
                        for (int round = 0; round < 50; round++) {
                            float[] x = floats(round + 1, caller * 1000 + round);
                            float[] y = floats(round + 1, caller * 1000 + round + 500);
                            assertSaxpy(h.infer(saxpyRequest(x, y)), x, y);
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread t : callers) {
                t.join();
            }
            assertEquals(List.of(), failures);
        }
        assertEquals(150, depths.size());
        assertTrue(depths.stream().allMatch(d -> d == 1), "context depth at launch: " + depths);
    }
}
