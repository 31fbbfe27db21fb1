package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Set;

/**
 * The Python-stub backend under the backend conformance kit (issue 7: every backend runs it),
 * with Triton's add_sub example from the sample repository, run by a real python3 stub.
 */
class PythonBackendConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        return new PythonBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.fromRepository(Path.of("../../samples/models"), "add_sub")
                .request(tag -> InferenceRequest.builder("add_sub")
                        .input(Tensor.ofFloats("INPUT0", new long[] {4}, tag, 1, 2, 3))
                        .input(Tensor.ofFloats("INPUT1", new long[] {4}, 1, tag, 1, 1)).build())
                .check((request, responses) -> {
                    float[] a = request.input("INPUT0").toFloatArray();
                    float[] b = request.input("INPUT1").toFloatArray();
                    float[] sum = new float[4];
                    float[] diff = new float[4];
                    for (int i = 0; i < 4; i++) {
                        sum[i] = a[i] + b[i];
                        diff[i] = a[i] - b[i];
                    }
                    assertArrayEquals(sum, responses.getFirst().output("OUTPUT0").toFloatArray());
                    assertArrayEquals(diff, responses.getFirst().output("OUTPUT1").toFloatArray());
                })
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        // KIND_GPU instances are accepted as in Triton (the Python model uses the device itself; tensors stay on the host).
        return EnumSet.of(Capability.DECOUPLED_STREAMING, Capability.BATCHING, Capability.GPU);
    }
}
