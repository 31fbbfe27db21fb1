package ${package};

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
import java.util.EnumSet;
import java.util.Set;

/**
 * The backend passes Backplane's conformance kit: every test method comes from
 * {@link BackendConformanceTest}, which runs the real host against this backend. Declare more
 * {@link Capability capabilities} as the backend gains them; the kit then checks them too.
 */
class ScaleConformanceTest extends BackendConformanceTest {
    static ModelConfig scaleByTwo() {
        return ModelConfig.builder("scale_by_two").backend(ScaleBackendFactory.NAME).parameter("factor", "2")
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT0", DataType.FP32, -1)).build();
    }

    static InferenceRequest request(long tag) {
        return InferenceRequest.builder("scale_by_two").input(Tensor.ofFloats("INPUT0", new long[] {2}, tag, 0.5f)).build();
    }

    @Override
    protected BackendFactory backend() {
        return new ScaleBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.builder(scaleByTwo())
                .request(ScaleConformanceTest::request)
                .check((request, responses) -> {
                    float[] sent = request.input("INPUT0").toFloatArray();
                    assertArrayEquals(new float[] {sent[0] * 2, sent[1] * 2}, responses.getFirst().output("OUTPUT0").toFloatArray());
                })
                .failingRequest(tag -> request(tag).toBuilder().parameter("fail", true).build())
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.CANCELLATION);
    }
}
