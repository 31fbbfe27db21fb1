package io.backplane.tests.zoo;

import io.backplane.backend.python.PythonBackendFactory;
import io.backplane.spi.BackendFactory;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.util.EnumSet;
import java.util.Set;

/**
 * The backend conformance kit (unchanged) over the python backend with the zoo's torch BERT
 * (bert_torch_small: model.py running transformers' BertModel in the model environment, whose
 * interpreter its config names through EXECUTION_ENV_PATH): every answer equals the ONNX export of
 * the same weights run directly by ONNX Runtime (ZooServedTest also compares it with torch itself).
 *
 * <p>The model is the zoo's without its {@code model_warmup} (see {@link Zoo#conformanceRepository()}).
 */
class ZooTorchConformanceTest extends BackendConformanceTest {
    @Override
    protected BackendFactory backend() {
        return new PythonBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        return ConformanceModel.fromRepository(conformanceRepository(), Zoo.BERT_TORCH).request(tag -> ZooRequests.bert(Zoo.BERT_TORCH, tag))
                .check(ZooRequests::check).failingRequest(tag -> ZooRequests.outOfVocabulary(Zoo.BERT_TORCH, tag)).build();
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
        // as PythonBackendConformanceTest: the python backend also serves decoupled models and KIND_GPU instances
        return EnumSet.of(Capability.DECOUPLED_STREAMING, Capability.BATCHING, Capability.GPU);
    }
}
