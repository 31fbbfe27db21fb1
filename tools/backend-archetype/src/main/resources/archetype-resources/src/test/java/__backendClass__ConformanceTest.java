package ${package};

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
 * The backend passes Backplane's conformance kit: every test method comes from
 * {@link BackendConformanceTest}, which runs the real host against this backend, loaded from the
 * packaged plugin directory target/plugin/${backendName}/ as the server loads it (the POM runs this
 * test in integration-test, after package, and names the folder in the system property
 * {@code backplane.plugin.directory}). The model is the sample of {@code models/}, the one
 * {@code backplane serve} serves. Declare more {@link Capability capabilities} as the backend gains
 * them; the kit then checks them too.
 */
class ${backendClass}ConformanceTest extends BackendConformanceTest {
    static final String MODEL = "${backendName}_sample";

    /** One row of two values, unique to the tag; the model batches, so the first dimension is the batch's. */
    static InferenceRequest request(long tag) {
        return InferenceRequest.builder(MODEL).input(Tensor.ofFloats("INPUT0", new long[] {1, 2}, tag, 0.5f)).build();
    }

    @Override
    protected BackendFactory backend() {
        return new ${backendClass}BackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.fromRepository(Path.of("models"), MODEL)
                .request(${backendClass}ConformanceTest::request)
                .check((request, responses) -> {
                    float[] sent = request.input("INPUT0").toFloatArray();
                    assertArrayEquals(new float[] {sent[0] * 2, sent[1] * 2}, responses.getFirst().output("OUTPUT0").toFloatArray());
                })
                .failingRequest(tag -> request(tag).toBuilder().parameter("fail", true).build())
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.BATCHING, Capability.CANCELLATION);
    }
}
