package io.backplane.backend.cuda;

import static io.backplane.backend.cuda.Fixtures.floats;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cuda backend inside the real host, over a copy of the sample repository: the missing
 * driver path with the real factory, and serving, failure recovery and unload with the
 * in-memory driver.
 */
class CudaHostTest {
    @TempDir
    Path repository;
    private FakeCudaDriver driver;

    /** The backend over the fake driver, as the host sees a backend. */
    private final class FakeDriverFactory implements BackendFactory {
        @Override
        public String name() {
            return CudaBackendFactory.NAME;
        }

        @Override
        public Backend create(BackendContext context) {
            return new CudaBackend(Fixtures.usable(driver), context.options());
        }
    }

    @BeforeEach
    void copySample() throws IOException {
        Path model = Files.createDirectories(repository.resolve("saxpy_cuda/1"));
        Files.copy(Fixtures.SAMPLE.resolve("config.pbtxt"), model.resolveSibling("config.pbtxt")); // with dynamic_batching
        Files.copy(Fixtures.SAMPLE.resolve("1/saxpy.ptx"), model.resolve("saxpy.ptx"));
        driver = Fixtures.fake(1);
    }

    @AfterEach
    void driverIsClean() {
        assertEquals(0, driver.leakedAtRelease());
        assertEquals(0, driver.liveDeviceAllocations());
        assertEquals(0, driver.livePinned());
        assertEquals(0, driver.liveStreams());
        assertEquals(0, driver.liveModules());
        assertEquals(0, driver.retainCount(0));
        driver.close();
    }

    private static InferenceRequest request(float[] x, float[] y) {
        return InferenceRequest.builder("saxpy_cuda").input(Tensor.ofFloats("X", new long[] {1, x.length}, x))
                .input(Tensor.ofFloats("Y", new long[] {1, y.length}, y)).build();
    }

    private static void assertSaxpy(InferenceResponse r, float[] x, float[] y) {
        assertFalse(r.isError(), () -> r.error().getMessage());
        float[] out = r.output("OUT").toFloatArray();
        for (int i = 0; i < x.length; i++) {
            assertEquals(Math.fma(2.0f, x[i], y[i]), out[i]);
        }
    }

    @Test
    void host_withoutDriver_gpuModelFailsToLoadClearly_hostStaysUp() {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository).modelControlMode(ModelControlMode.EXPLICIT)
                .backend(new CudaBackendFactory()).backendOption("cuda", "library", "libcuda-missing-in-host-test.so.1").build()) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("saxpy_cuda"));
            assertTrue(e.getMessage().contains("needs a GPU, but the CUDA driver library libcuda-missing-in-host-test.so.1 could not be loaded"),
                    e.getMessage());
            assertTrue(host.isLive());
            assertFalse(host.isModelReady("saxpy_cuda"));
            assertTrue(host.backends().contains("cuda"), host.backends().toString());
        }
    }

    @Test
    void host_fakeDriver_servesConcurrentRequests_andUnloadFreesTheGpu() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository).loadModel("saxpy_cuda")
                .backend(new FakeDriverFactory()).build()) {
            assertTrue(host.isModelReady("saxpy_cuda"));
            List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
            List<float[][]> data = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                float[] x = floats(1 + i * 13, i);
                float[] y = floats(1 + i * 13, 100 + i);
                data.add(new float[][] {x, y});
                futures.add(host.infer(request(x, y)));
            }
            for (int i = 0; i < futures.size(); i++) {
                assertSaxpy(futures.get(i).get(10, TimeUnit.SECONDS), data.get(i)[0], data.get(i)[1]);
            }
            assertTrue(driver.launches <= 40, "one launch per batch: " + driver.launches);
            assertEquals(1, driver.retainCount(0));
            host.unload("saxpy_cuda");
            assertEquals(0, driver.retainCount(0), "unload released the GPU");
            assertEquals(0, driver.liveDeviceAllocations(), "unload freed every device allocation");
        }
    }

    @Test
    void host_kernelFault_failsThatRequest_instanceIsRecreated_nextRequestSucceeds() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository).loadModel("saxpy_cuda")
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50)).backend(new FakeDriverFactory()).build()) {
            driver.failNext("cuStreamSynchronize", 700);
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> host.infer(request(floats(8, 1), floats(8, 2))).get(10, TimeUnit.SECONDS));
            assertTrue(e.getCause().getMessage().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), e.getCause().getMessage());
            float[] x = floats(64, 3);
            float[] y = floats(64, 4);
            InferenceResponse next = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (System.nanoTime() < deadline) { // the core restarts the instance with backoff; readiness tells when
                if (host.isModelReady("saxpy_cuda")) {
                    try {
                        next = host.infer(request(x, y)).get(10, TimeUnit.SECONDS);
                        break;
                    } catch (ExecutionException retry) {
                        assertEquals(ErrorCode.UNAVAILABLE, ((BackplaneException) retry.getCause()).code(), retry.getCause().getMessage());
                    }
                }
                Thread.sleep(10);
            }
            assertTrue(next != null, "the model never served again after the fault");
            assertSaxpy(next, x, y);
        }
    }
}
