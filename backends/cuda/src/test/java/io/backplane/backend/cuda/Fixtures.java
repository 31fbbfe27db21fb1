package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.ModelHarness;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Shared test data: the sample model, configs, requests, a usable fake driver, and harnesses over it. */
final class Fixtures {
    static final Path SAMPLE = Path.of("../../samples/gpu-models/saxpy_cuda").toAbsolutePath().normalize();

    private Fixtures() {
    }

    /** The sample's config.pbtxt, parsed by the host's parser. */
    static ModelConfig sampleConfig() {
        return ModelConfigParser.parseModelDirectory(SAMPLE);
    }

    static CudaLibrary.Status usable(FakeCudaDriver driver) {
        CudaLibrary.Status s = CudaLibrary.probe("fake-libcuda", driver);
        assertFalse(s.problem() != null, () -> "fake driver unusable: " + s.problem());
        return s;
    }

    static FakeCudaDriver fake(int devices) {
        return new FakeCudaDriver(12080, devices, 1L << 30).kernel("saxpy", FakeCudaDriver.SAXPY);
    }

    /** The cuda backend over {@code driver}, as the host sees a backend. */
    static BackendFactory factory(FakeCudaDriver driver) {
        return new BackendFactory() {
            @Override
            public String name() {
                return CudaBackendFactory.NAME;
            }

            @Override
            public BackendCapabilities capabilities() {
                return new CudaBackendFactory().capabilities(); // the real factory's: KIND_AUTO goes where it would in serve
            }

            @Override
            public Backend create(BackendContext context) {
                return new CudaBackend(usable(driver), context.options());
            }
        };
    }

    /** The sample model on the fake driver inside the real core, with the harness's exact batches. */
    static ModelHarness.Builder harness(FakeCudaDriver driver) {
        return harness(driver, sampleConfig());
    }

    /** {@code config} with the sample's PTX, on the fake driver inside the real core. */
    static ModelHarness.Builder harness(FakeCudaDriver driver, ModelConfig config) {
        return ModelHarness.builder(factory(driver)).model(config).versionFilesFrom(SAMPLE.resolve("1")).exactBatches();
    }

    static float[] floats(int n, int seed) {
        float[] f = new float[n];
        java.util.Random r = new java.util.Random(seed);
        for (int i = 0; i < n; i++) {
            f[i] = r.nextFloat() * 20 - 10;
        }
        return f;
    }

    static InferenceRequest saxpyRequest(float[] x, float[] y) {
        return InferenceRequest.builder("saxpy_cuda")
                .input(Tensor.ofFloats("X", new long[] {1, x.length}, x))
                .input(Tensor.ofFloats("Y", new long[] {1, y.length}, y)).build();
    }

    static void assertSaxpy(InferenceResponse response, float[] x, float[] y) {
        assertFalse(response.isError(), () -> "error: " + response.error().getMessage());
        float[] out = response.output("OUT").toFloatArray();
        assertEquals(x.length, out.length);
        for (int i = 0; i < x.length; i++) {
            assertEquals(Math.fma(2.0f, x[i], y[i]), out[i], "OUT[" + i + "]");
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (Files.exists(dir)) {
            GpuSelfTest.deleteTree(dir);
        }
    }
}
