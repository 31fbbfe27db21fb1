package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.ModelHarness;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** samples/models/onnx_add_sub parses with the host's config parser and serves with the cpu backend through the real core. */
class SampleModelTest {
    @Test
    void sample_onnxAddSub_parsesLoadsAndAnswers() throws Exception {
        Path dir = Path.of("../../samples/models/onnx_add_sub").toAbsolutePath().normalize();
        assertEquals(true, Files.isRegularFile(dir.resolve("1/model.onnx")), "sample model missing at " + dir);
        ModelConfig config = ModelConfigParser.parseModelDirectory(dir);
        assertEquals("onnxruntime_onnx", config.platform());
        assertNotNull(config.dynamicBatching());
        try (ModelHarness m = ModelHarness.builder(new OnnxBackendFactory()).modelFolder(dir).start()) {
            InferenceResponse r = m.infer(TestModels.request("onnx_add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 4}, 1, 2, 3, 4),
                    Tensor.ofFloats("INPUT1", new long[] {1, 4}, 10, 20, 30, 40)));
            assertArrayEquals(new float[] {11, 22, 33, 44}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {-9, -18, -27, -36}, r.output("OUTPUT1").toFloatArray());
        }
        assertEquals(0, OnnxModel.openSessions(), "sessions left open");
    }
}
