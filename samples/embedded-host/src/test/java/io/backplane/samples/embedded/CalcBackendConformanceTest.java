package io.backplane.samples.embedded;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.util.EnumSet;
import java.util.Set;

/** The sample's in-process calc backend passes the conformance kit with its add_sub model. */
class CalcBackendConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        return new CalcBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.builder(CalcBackendFactory.addSub())
                .request(tag -> InferenceRequest.builder("add_sub").input(Tensor.ofFloats("INPUT0", new long[] {4}, tag, 1, 2, 3))
                        .input(Tensor.ofFloats("INPUT1", new long[] {4}, 1, tag, 1, 1)).build())
                .check((req, responses) -> {
                    float[] a = req.input("INPUT0").toFloatArray();
                    float[] b = req.input("INPUT1").toFloatArray();
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
        return EnumSet.of(Capability.CANCELLATION);
    }
}
