package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.ModelHarness;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Models written by today's exporters: ONNX Runtime 1.23 read IR versions up to 11; the bundled 1.29
 * reads up to 13 (what torch's exporter and onnx 1.17 to 1.22 write). The {@code onnx} package on the
 * local index (1.23) writes IR 14 by default, which no ONNX Runtime release reads yet (Python's 1.30
 * neither): it is refused with ORT's message, naming both versions, and what to do.
 */
class IrVersionTest {
    @Test
    void aModelOfIrVersion13_loadsAndServes(@TempDir Path dir) throws Exception {
        try (ModelHarness h = TestModels.harness(TestModels.addSub(), withIrVersion(dir, 13)).start()) {
            InferenceResponse r = h.infer(TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 4}, 1, 2, 3, 4),
                    Tensor.ofFloats("INPUT1", new long[] {1, 4}, 1, 1, 1, 1)));
            assertFalse(r.isError(), String.valueOf(r.error()));
            assertArrayEquals(new float[] {2, 3, 4, 5}, r.outputs().get(0).toFloatArray());
        }
    }

    @Test
    void aModelOfAnIrVersionTheRuntimeDoesNotKnow_isRefused_namingTheVersion(@TempDir Path dir) throws Exception {
        Path model = withIrVersion(dir, 14);
        BackplaneException e = assertThrows(BackplaneException.class, () -> TestModels.harness(TestModels.addSub(), model).start().close());
        assertTrue(e.getMessage().contains("Unsupported model IR version: 14"), e.getMessage());
        assertTrue(e.getMessage().contains("ir_version=13"), "says what to do: " + e.getMessage());
    }

    /** A copy of add_sub whose ModelProto.ir_version (field 1, the file's first varint) is {@code version}. */
    private static Path withIrVersion(Path dir, int version) throws IOException {
        byte[] bytes = Files.readAllBytes(TestModels.dir("add_sub").resolve("1/model.onnx"));
        assertEquals(0x08, bytes[0], "ModelProto starts with field 1 (ir_version), varint");
        assertTrue(bytes[1] >= 0 && version < 128, "a one-byte varint on both sides");
        bytes[1] = (byte) version;
        Path v1 = Files.createDirectories(dir.resolve("add_sub/1"));
        Files.write(v1.resolve("model.onnx"), bytes);
        return dir.resolve("add_sub");
    }
}
