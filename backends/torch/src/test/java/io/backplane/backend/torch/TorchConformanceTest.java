package io.backplane.backend.torch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.EnumSet;
import java.util.Set;

/**
 * The pytorch backend passes the Backplane conformance kit, on a TorchScript model scripted at test
 * time ({@code echo}: x * 2 + 1, raising for values below -1000, the kit's failing request),
 * batching up to 8 rows.
 */
class TorchConformanceTest extends BackendConformanceTest {
    static ModelConfig echo() {
        return ModelConfig.builder("echo").backend(TorchBackendFactory.NAME).maxBatchSize(8)
                .input(TensorConfig.of("INPUT__0", DataType.FP32, 4)).output(TensorConfig.of("OUTPUT__0", DataType.FP32, 4)).build();
    }

    static InferenceRequest request(long tag) {
        float t = tag % 1000;
        return InferenceRequest.builder("echo").input(Tensor.ofFloats("INPUT__0", new long[] {1, 4}, t, t + 1, t + 2, -t)).build();
    }

    @Override
    protected BackendFactory backend() {
        return new TorchBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        byte[] pt;
        try {
            pt = TorchModels.modelFile("echo");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
        return ConformanceModel.builder(echo())
                .versionFile("model.pt", pt)
                .request(TorchConformanceTest::request)
                .check((request, responses) -> {
                    float[] in = request.input("INPUT__0").toFloatArray();
                    float[] want = new float[in.length];
                    for (int i = 0; i < in.length; i++) {
                        want[i] = in[i] * 2 + 1;
                    }
                    assertArrayEquals(want, responses.getFirst().output("OUTPUT__0").toFloatArray());
                })
                .failingRequest(tag -> InferenceRequest.builder("echo")
                        .input(Tensor.ofFloats("INPUT__0", new long[] {1, 4}, 1, 2, 3, -5000)).build())
                .build();
    }

    /**
     * JNA's one cleaner thread (a daemon, one per JVM and class loader of JNA), started when DJL probes
     * for CUDA through JNA at engine start; it belongs to the library loaded once for the process,
     * not to a model or instance, and holds nothing of them.
     */
    @Override
    protected boolean ignoreLeftoverThread(Thread thread) {
        return thread.isDaemon() && thread.getName().equals("JNA Cleaner");
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.BATCHING, Capability.CANCELLATION);
    }
}
