package io.backplane.tests.zoo;

import io.backplane.backend.cpu.OnnxBackendFactory;
import io.backplane.spi.BackendFactory;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.util.EnumSet;
import java.util.Set;

/**
 * The backend conformance kit (its lifecycle, cancellation, batching and concurrency checks,
 * unchanged) over the cpu backend with the zoo's real BERT (bert_small, ONNX): every answer equals
 * ONNX Runtime called directly on that request.
 *
 * <p>The model is the zoo's without its {@code model_warmup} (see {@link Zoo#conformanceRepository()}).
 */
class ZooOnnxConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        return new OnnxBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.fromRepository(conformanceRepository(), Zoo.BERT).request(tag -> ZooRequests.bert(Zoo.BERT, tag))
                .check(ZooRequests::check).failingRequest(tag -> ZooRequests.outOfVocabulary(Zoo.BERT, tag)).build();
    }

    private static java.nio.file.Path conformanceRepository() {
        try {
            return Zoo.conformanceRepository();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** The conformance repository links the zoo's files (and names the model environment), outside itself. */
    @Override
    protected void configureHost(io.backplane.core.BackplaneHost.Builder builder) {
        builder.allowLinksOutsideRepository(true);
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.BATCHING, Capability.CANCELLATION);
    }
}
