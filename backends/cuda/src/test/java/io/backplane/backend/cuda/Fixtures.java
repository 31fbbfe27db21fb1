package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.stream.Stream;

/** Shared test data: the sample model, configs, requests, and a usable fake driver status. */
final class Fixtures {
    static final Path SAMPLE = Path.of("../../samples/gpu-models/saxpy_cuda").toAbsolutePath().normalize();

    private Fixtures() {
    }

    static ModelConfig sampleConfig() {
        try {
            return SimplePbtxt.parse(Files.readString(SAMPLE.resolve("config.pbtxt")));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Standalone.Model sampleModel() {
        return Standalone.Model.of(SAMPLE, 1, sampleConfig());
    }

    /** A copy of the sample model in {@code dir} with {@code config} and the given PTX text (null: the sample's). */
    static Standalone.Model modelIn(Path dir, ModelConfig config, String ptx) throws IOException {
        Path version = Files.createDirectories(dir.resolve(config.name()).resolve("1"));
        String text = ptx != null ? ptx : Files.readString(SAMPLE.resolve("1/saxpy.ptx"));
        Files.writeString(version.resolve("saxpy.ptx"), text);
        return Standalone.Model.of(dir.resolve(config.name()), 1, config);
    }

    static CudaLibrary.Status usable(FakeCudaDriver driver) {
        CudaLibrary.Status s = CudaLibrary.probe("fake-libcuda", driver);
        assertFalse(s.problem() != null, () -> "fake driver unusable: " + s.problem());
        return s;
    }

    static FakeCudaDriver fake(int devices) {
        return new FakeCudaDriver(12080, devices, 1L << 30).kernel("saxpy", FakeCudaDriver.SAXPY);
    }

    static CudaBackend backend(FakeCudaDriver driver) {
        return new CudaBackend(usable(driver), Map.of());
    }

    static float[] floats(int n, int seed) {
        float[] f = new float[n];
        java.util.Random r = new java.util.Random(seed);
        for (int i = 0; i < n; i++) {
            f[i] = r.nextFloat() * 20 - 10;
        }
        return f;
    }

    static Standalone.Request saxpyRequest(float[] x, float[] y) {
        return new Standalone.Request(InferenceRequest.builder("saxpy_cuda")
                .input(Tensor.ofFloats("X", new long[] {1, x.length}, x))
                .input(Tensor.ofFloats("Y", new long[] {1, y.length}, y)).build());
    }

    static void assertSaxpy(Standalone.Request r, float[] x, float[] y) {
        InferenceResponse response = r.response();
        assertNotNull(response, "no response for request " + r.id());
        assertFalse(response.isError(), () -> "error: " + response.error().getMessage());
        float[] out = response.output("OUT").toFloatArray();
        assertEquals(x.length, out.length);
        for (int i = 0; i < x.length; i++) {
            assertEquals(Math.fma(2.0f, x[i], y[i]), out[i], "OUT[" + i + "]");
        }
        assertEquals(1, r.sends());
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
