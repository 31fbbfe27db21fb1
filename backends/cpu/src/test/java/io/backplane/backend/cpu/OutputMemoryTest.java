package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.DataType;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.ModelHarness;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Outputs whose shape follows from the inputs' are written by ONNX Runtime straight into the
 * response's (native) memory; the others, and a model whose declared output shape is wrong, are
 * copied out of ORT's memory (heap), with the same values.
 */
class OutputMemoryTest {
    @AfterEach
    void sessionsClosed() {
        assertEquals(0, OnnxModel.openSessions(), "sessions left open");
    }

    @Test
    void fixedAndSymbolicOutputShapes_writtenInPlace() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            InferenceResponse r = m.infer(TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {2, 4}, 1, 2, 3, 4, 5, 6, 7, 8),
                    Tensor.ofFloats("INPUT1", new long[] {2, 4}, 1, 1, 1, 1, 2, 2, 2, 2)));
            assertFalse(r.isError(), String.valueOf(r));
            assertArrayEquals(new float[] {2, 3, 4, 5, 7, 8, 9, 10}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {0, 1, 2, 3, 3, 4, 5, 6}, r.output("OUTPUT1").toFloatArray());
            assertTrue(r.output("OUTPUT0").data().isNative(), "a fixed [batch, 4] output should be ORT's own write, not a copy");
        }
        try (ModelHarness m = TestModels.start(TestModels.dynamicDim())) {
            InferenceResponse r = m.infer(TestModels.request("dynamic_dim", Tensor.ofFloats("INPUT0", new long[] {1, 3}, 1, 2, 3)));
            assertArrayEquals(new float[] {2, 4, 6}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {6}, r.output("OUTPUT1").toFloatArray());
            assertTrue(r.output("OUTPUT0").data().isNative(), "[batch, n] follows from INPUT0's [batch, n]");
            assertTrue(r.output("OUTPUT1").data().isNative(), "[batch, 1] follows from the batch");
        }
    }

    @Test
    void declaredShapeWrong_sameAnswersCopiedOut() throws Exception {
        ModelConfig c = ModelConfig.builder("wrong_shape").platform("onnxruntime_onnx").maxBatchSize(8)
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT0", DataType.FP32, -1)).build();
        try (ModelHarness m = TestModels.start(c)) {
            for (int i = 0; i < 2; i++) {
                InferenceResponse r = m.infer(TestModels.request("wrong_shape", Tensor.ofFloats("INPUT0", new long[] {1, 2}, 1, i)));
                assertFalse(r.isError(), String.valueOf(r));
                assertArrayEquals(new long[] {1, 4}, r.output("OUTPUT0").shape());
                assertArrayEquals(new float[] {1, i, 1, i}, r.output("OUTPUT0").toFloatArray());
                assertFalse(r.output("OUTPUT0").data().isNative(), "ORT refused the declared shape: the output is copied out");
            }
        }
    }
}
