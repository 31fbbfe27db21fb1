package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.onnxruntime.OrtSession.SessionOptions.ExecutionMode;
import ai.onnxruntime.OrtSession.SessionOptions.OptLevel;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.ModelHarness;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Session options read from config.pbtxt as Triton's onnxruntime backend reads them: the
 * {@code parameters}, {@code optimization { graph { level } }} and
 * {@code optimization { execution_accelerators }}; every bad value is refused naming it.
 */
class SessionOptionsTest {
    private static final String ADD_SUB = """
            name: "add_sub"
            platform: "onnxruntime_onnx"
            max_batch_size: 8
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
            """;

    @AfterEach
    void sessionsClosed() {
        assertEquals(0, OnnxModel.openSessions(), "sessions left open");
    }

    private static ModelConfig config(String extra) {
        return ModelConfigParser.parse(ADD_SUB + extra, "config.pbtxt", "add_sub");
    }

    private static SessionSettings settings(String extra) {
        return SessionSettings.from(config(extra), Map.of());
    }

    private static BackplaneException refused(String extra) {
        return assertThrows(BackplaneException.class, () -> settings(extra));
    }

    private static void assertNames(BackplaneException e, ErrorCode code, String... parts) {
        assertEquals(code, e.code(), e.getMessage());
        for (String p : parts) {
            assertTrue(e.getMessage().contains(p), "message lacks '" + p + "': " + e.getMessage());
        }
    }

    @Test
    void tritonParameters_read() {
        SessionSettings s = settings("""
                parameters { key: "intra_op_thread_count" value: { string_value: "3" } }
                parameters { key: "inter_op_thread_count" value: { string_value: "2" } }
                parameters { key: "execution_mode" value: { string_value: "1" } }
                parameters { key: "enable_mem_arena" value: { string_value: "0" } }
                parameters { key: "enable_mem_pattern" value: { string_value: "0" } }
                parameters { key: "memory.enable_memory_arena_shrinkage" value: { string_value: "cpu:0" } }
                parameters { key: "session.intra_op.allow_spinning" value: { string_value: "0" } }
                """);
        assertEquals(3, s.intraOpThreads());
        assertEquals(2, s.interOpThreads());
        assertEquals(ExecutionMode.PARALLEL, s.executionMode());
        assertFalse(s.memoryArena());
        assertFalse(s.memoryPattern());
        assertEquals(Map.of("memory.enable_memory_arena_shrinkage", "cpu:0"), s.runConfigEntries());
        assertEquals(Map.of("session.intra_op.allow_spinning", "0"), s.configEntries());
        assertEquals(OptLevel.ALL_OPT, s.optimizationLevel());
    }

    @Test
    void graphLevel_tritonValues() {
        assertEquals(OptLevel.BASIC_OPT, settings("optimization { graph { level: -1 } }").optimizationLevel());
        assertEquals(OptLevel.EXTENDED_OPT, settings("optimization { graph { level: 1 } }").optimizationLevel());
        assertEquals(OptLevel.NO_OPT, settings("optimization { graph { level: 2 } }").optimizationLevel());
        assertEquals(OptLevel.ALL_OPT, settings("optimization { graph { level: 0 } }").optimizationLevel());
        assertNames(refused("optimization { graph { level: 7 } }"), ErrorCode.INVALID_ARGUMENT, "level: 7", "-1 (basic)");
        assertNames(refused("""
                optimization { graph { level: 1 } }
                parameters { key: "graph_optimization_level" value: { string_value: "BASIC" } }
                """), ErrorCode.INVALID_ARGUMENT, "graph_optimization_level", "keep one");
    }

    @Test
    void badValues_refusedNamingThem() {
        assertNames(refused("parameters { key: \"execution_mode\" value: { string_value: \"2\" } }"), ErrorCode.INVALID_ARGUMENT,
                "execution_mode", "'2'");
        assertNames(refused("parameters { key: \"enable_mem_arena\" value: { string_value: \"maybe\" } }"), ErrorCode.INVALID_ARGUMENT,
                "enable_mem_arena", "maybe");
        assertNames(refused("parameters { key: \"memory.enable_memory_arena_shrinkage\" value: { string_value: \"gpu:0\" } }"),
                ErrorCode.INVALID_ARGUMENT, "memory.enable_memory_arena_shrinkage", "'gpu:0'", "cpu:0");
        assertNames(refused("parameters { key: \"inter_op_thread_count\" value: { string_value: \"-3\" } }"), ErrorCode.INVALID_ARGUMENT,
                "inter_op_thread_count");
    }

    @Test
    void accelerators_unknownRefused_openvinoRefusedWhereOrtLacksIt_gpuOnesNotApplied() {
        assertNames(refused("optimization { execution_accelerators { cpu_execution_accelerator [ { name: \"turbo\" } ] } }"),
                ErrorCode.INVALID_ARGUMENT, "unknown cpu_execution_accelerator 'turbo'", "openvino");
        if (!ai.onnxruntime.OrtEnvironment.getAvailableProviders().contains(ai.onnxruntime.OrtProvider.OPEN_VINO)) {
            assertNames(refused("optimization { execution_accelerators { cpu_execution_accelerator [ { name: \"openvino\" } ] } }"),
                    ErrorCode.UNSUPPORTED, "'openvino'", "no OpenVINO execution provider");
        }
        SessionSettings s = settings("optimization { execution_accelerators { gpu_execution_accelerator [ { name: \"tensorrt\" } ] } }");
        assertEquals(List.of(), s.accelerators());
    }

    @Test
    void allowRaggedBatch_refusedNamingTheField() {
        // Triton's flattened ragged inputs are not supported; requests of different shapes still batch (as separate ORT calls)
        String ragged = ADD_SUB.replace("name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ]",
                "name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true");
        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelConfigParser.parse(ragged, "config.pbtxt", "add_sub"));
        assertTrue(e.getMessage().contains("allow_ragged_batch"), e.getMessage());
    }

    @Test
    void settingsFromConfig_modelLoadsAndServes() throws Exception {
        ModelConfig c = config("""
                optimization { graph { level: 1 } }
                parameters { key: "memory.enable_memory_arena_shrinkage" value: { string_value: "cpu:0" } }
                parameters { key: "execution_mode" value: { string_value: "PARALLEL" } }
                """);
        try (ModelHarness m = TestModels.harness(c).start()) {
            var r = m.infer(TestModels.request("add_sub", Tensor.ofFloats("INPUT0", new long[] {1, 4}, 1, 2, 3, 4),
                    Tensor.ofFloats("INPUT1", new long[] {1, 4}, 1, 1, 1, 1)));
            assertFalse(r.isError(), String.valueOf(r));
            assertEquals(List.of(2f, 3f, 4f, 5f), boxed(r.output("OUTPUT0").toFloatArray()));
        }
        BackplaneException e = assertThrows(BackplaneException.class, () -> TestModels.harness(config(
                "optimization { execution_accelerators { cpu_execution_accelerator [ { name: \"turbo\" } ] } }")).start().close());
        assertNames(e, ErrorCode.INVALID_ARGUMENT, "'turbo'");
    }

    private static List<Float> boxed(float[] v) {
        List<Float> out = new java.util.ArrayList<>();
        for (float f : v) {
            out.add(f);
        }
        return out;
    }
}
