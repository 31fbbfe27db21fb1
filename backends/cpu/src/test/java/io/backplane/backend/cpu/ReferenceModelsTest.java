package io.backplane.backend.cpu;

import static io.backplane.backend.cpu.TestModels.assertTensorEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.ModelHarness;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every committed model against the outputs ONNX Runtime's Python API computed when the model was
 * generated, element by element: every Open Inference Protocol datatype through an identity model,
 * add/sub with a batch dimension, and a model with a dynamic non-batch dimension.
 */
class ReferenceModelsTest {
    @AfterEach
    void sessionsClosed() {
        assertEquals(0, OnnxModel.openSessions(), "sessions left open");
    }

    @ParameterizedTest
    @EnumSource(DataType.class)
    void identity_everyDatatype_matchesReference(DataType type) throws Exception {
        check(TestModels.identity(type));
    }

    @Test
    void addSub_batchDimension_matchesReference() throws Exception {
        check(TestModels.addSub());
    }

    @Test
    void dynamicDim_dynamicNonBatchDimension_matchesReference() throws Exception {
        check(TestModels.dynamicDim());
    }

    private static void check(ModelConfig config) throws Exception {
        List<TestModels.Case> cases = TestModels.references(config.name());
        assertFalse(cases.isEmpty(), "no reference cases for " + config.name());
        try (ModelHarness m = TestModels.start(config)) {
            for (TestModels.Case c : cases) {
                InferenceResponse r = m.infer(InferenceRequest.builder(config.name()).inputs(c.inputs()).build());
                assertFalse(r.isError(), () -> String.valueOf(r.error()));
                assertEquals(c.outputs().size(), r.outputs().size(), "outputs of " + config.name());
                for (int i = 0; i < c.outputs().size(); i++) {
                    assertTensorEquals(c.outputs().get(i), r.outputs().get(i));
                }
            }
        }
    }
}
