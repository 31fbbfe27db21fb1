package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.util.EnumSet;
import java.util.Set;

/**
 * The cuda backend under the backend conformance kit, over the in-memory driver (no GPU here):
 * the sample saxpy model, batched and cancellable, on GPU 0.
 */
class CudaBackendConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        FakeCudaDriver driver = Fixtures.fake(1);
        return new BackendFactory() {
            @Override
            public String name() {
                return CudaBackendFactory.NAME;
            }

            @Override
            public Backend create(BackendContext context) {
                return new CudaBackend(Fixtures.usable(driver), context.options());
            }
        };
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.fromRepository(Fixtures.SAMPLE.getParent(), "saxpy_cuda")
                .request(tag -> InferenceRequest.builder("saxpy_cuda")
                        .input(Tensor.ofFloats("X", new long[] {1, 4}, tag, 1, 2, 3))
                        .input(Tensor.ofFloats("Y", new long[] {1, 4}, 1, tag, -1, 0.5f)).build())
                .check((request, responses) -> {
                    float[] x = request.input("X").toFloatArray();
                    float[] y = request.input("Y").toFloatArray();
                    float[] expected = new float[x.length];
                    for (int i = 0; i < x.length; i++) {
                        expected[i] = Math.fma(2.0f, x[i], y[i]);
                    }
                    assertArrayEquals(expected, responses.getFirst().output("OUT").toFloatArray());
                })
                // X and Y of different lengths: the config allows each, the element-wise launch refuses the pair.
                .failingRequest(tag -> InferenceRequest.builder("saxpy_cuda")
                        .input(Tensor.ofFloats("X", new long[] {1, 4}, tag, 1, 2, 3))
                        .input(Tensor.ofFloats("Y", new long[] {1, 3}, 1, 2, 3)).build())
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.BATCHING, Capability.CANCELLATION, Capability.GPU);
    }
}
