package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.ModelHarness;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Wrong requests and wrong configs fail with errors that say what was wrong; a bad model file fails
 * only its own load. Through the real core: a request the core's validation refuses never reaches
 * the backend, so these messages are what a client of the host sees.
 */
class ValidationTest {
    @AfterEach
    void sessionsClosed() {
        assertEquals(0, OnnxModel.openSessions(), "sessions left open");
    }

    private static void assertError(InferenceResponse r, ErrorCode code, String... parts) {
        assertTrue(r.isError(), "expected an error, got " + r);
        assertError(r.error(), code, parts);
    }

    private static void assertError(BackplaneException e, ErrorCode code, String... parts) {
        assertEquals(code, e.code(), e.getMessage());
        for (String p : parts) {
            assertTrue(e.getMessage().contains(p), "message lacks '" + p + "': " + e.getMessage());
        }
    }

    private static BackplaneException loadFails(ModelConfig config) {
        return assertThrows(BackplaneException.class, () -> TestModels.start(config).close());
    }

    private static Tensor floats(String name, long... shape) {
        return Tensor.ofFloats(name, shape, new float[(int) java.util.Arrays.stream(shape).reduce(1, (a, b) -> a * b)]);
    }

    // --- requests

    @Test
    void execute_wrongDatatype_rejectedNamingBothTypes() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            InferenceResponse r = m.infer(TestModels.request("add_sub", Tensor.ofDoubles("INPUT0", new long[] {1, 4}, 1, 2, 3, 4),
                    floats("INPUT1", 1, 4)));
            assertError(r, ErrorCode.INVALID_ARGUMENT, "'INPUT0'", "FP64", "FP32");
        }
    }

    @Test
    void execute_wrongShape_rejectedNamingShapes() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            assertError(m.infer(TestModels.request("add_sub", floats("INPUT0", 1, 5), floats("INPUT1", 1, 5))),
                    ErrorCode.INVALID_ARGUMENT, "'INPUT0'", "[1, 5]", "[-1] + [4]");
            assertError(m.infer(TestModels.request("add_sub", floats("INPUT0", 4), floats("INPUT1", 4))),
                    ErrorCode.INVALID_ARGUMENT, "'INPUT0'", "[4]");
            assertError(m.infer(TestModels.request("add_sub", floats("INPUT0", 2, 4), floats("INPUT1", 3, 4))),
                    ErrorCode.INVALID_ARGUMENT, "disagree on the batch size");
            assertError(m.infer(TestModels.request("add_sub", floats("INPUT0", 9, 4), floats("INPUT1", 9, 4))),
                    ErrorCode.INVALID_ARGUMENT, "batch size 9", "max_batch_size 8");
        }
    }

    @Test
    void execute_missingUnknownInputsAndOutputs_rejected() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.addSub())) {
            assertError(m.infer(TestModels.request("add_sub", floats("INPUT0", 1, 4))), ErrorCode.INVALID_ARGUMENT,
                    "needs input 'INPUT1'");
            assertError(m.infer(TestModels.request("add_sub", floats("INPUT0", 1, 4), floats("INPUT1", 1, 4), floats("EXTRA", 1, 4))),
                    ErrorCode.INVALID_ARGUMENT, "'EXTRA'", "[INPUT0, INPUT1]");
            InferenceRequest unknownOut = InferenceRequest.builder("add_sub").input(floats("INPUT0", 1, 4)).input(floats("INPUT1", 1, 4))
                    .requestOutput("NOPE").build();
            assertError(m.infer(unknownOut), ErrorCode.INVALID_ARGUMENT, "'NOPE'", "[OUTPUT0, OUTPUT1]");
        }
    }

    @Test
    void execute_bytesThatAreNotUtf8_rejectedClearly() throws Exception {
        try (ModelHarness m = TestModels.start(TestModels.identity(DataType.BYTES))) {
            InferenceResponse r = m.infer(TestModels.request("identity_bytes",
                    Tensor.ofBytes("INPUT0", new long[] {1, 2}, List.of("ok".getBytes(java.nio.charset.StandardCharsets.UTF_8),
                            new byte[] {(byte) 0xff, (byte) 0xfe}))));
            assertError(r, ErrorCode.INVALID_ARGUMENT, "element 1", "UTF-8");
        }
    }

    // --- configs

    @Test
    void load_configDatatypeDiffersFromModel_failsNamingBoth() {
        ModelConfig c = TestModels.addSub().toBuilder().clearInputs().input(TensorConfig.of("INPUT0", DataType.FP64, 4))
                .input(TensorConfig.of("INPUT1", DataType.FP32, 4)).build();
        assertError(loadFails(c), ErrorCode.INVALID_ARGUMENT, "input 'INPUT0'", "TYPE_FP64", "TYPE_FP32", "tensor(float)");
    }

    @Test
    void load_configDimsDifferFromModel_fails() {
        ModelConfig c = TestModels.addSub().toBuilder().clearOutputs().output(TensorConfig.of("OUTPUT0", DataType.FP32, 5)).build();
        assertError(loadFails(c), ErrorCode.INVALID_ARGUMENT, "output 'OUTPUT0'", "dimension 1 is 4 in the model but 5");
        ModelConfig noBatch = TestModels.addSub().toBuilder().maxBatchSize(0).build();
        assertError(loadFails(noBatch), ErrorCode.INVALID_ARGUMENT, "rank 2 in the model but 1");
    }

    @Test
    void load_unknownOrMissingTensor_fails() {
        ModelConfig unknown = TestModels.addSub().toBuilder().input(TensorConfig.of("INPUT9", DataType.FP32, 4)).build();
        assertError(loadFails(unknown), ErrorCode.INVALID_ARGUMENT, "'INPUT9'", "'INPUT0' TYPE_FP32 [-1, 4]");
        ModelConfig missing = TestModels.addSub().toBuilder().clearInputs().input(TensorConfig.of("INPUT0", DataType.FP32, 4)).build();
        assertError(loadFails(missing), ErrorCode.INVALID_ARGUMENT, "has input 'INPUT1'", "does not declare it");
    }

    @Test
    void load_unsupportedSettings_failClearly() {
        ModelConfig reshape = TestModels.addSub().toBuilder().clearInputs()
                .input(TensorConfig.builder("INPUT0", DataType.FP32).dims(4).reshape(List.of(2L, 2L)).build())
                .input(TensorConfig.of("INPUT1", DataType.FP32, 4)).build();
        // the backend sees the reshape shape, so the model must have it (QuickStartServerTest serves one that does)
        assertError(loadFails(reshape), ErrorCode.INVALID_ARGUMENT, "'INPUT0'", "[batch] + [2, 2] (reshape)", "the model [-1, 4]");
        ModelConfig gpu = TestModels.addSub().toBuilder().instanceGroup(InstanceGroup.of("g", 1, InstanceKind.GPU, List.of())).build();
        assertError(loadFails(gpu), ErrorCode.UNSUPPORTED, "KIND_GPU");
        ModelConfig unknownParam = TestModels.addSub().toBuilder().parameter("intra_op_threads", "2").build();
        assertError(loadFails(unknownParam), ErrorCode.INVALID_ARGUMENT, "'intra_op_threads'", "intra_op_thread_count");
        ModelConfig badValue = TestModels.addSub().toBuilder().parameter("intra_op_thread_count", "many").build();
        assertError(loadFails(badValue), ErrorCode.INVALID_ARGUMENT, "intra_op_thread_count='many'");
    }

    @Test
    void load_parametersApplied_modelServes() throws Exception {
        ModelConfig c = TestModels.addSub().toBuilder().parameter("intra_op_thread_count", "1").parameter("inter_op_thread_count", "1")
                .parameter("execution_mode", "PARALLEL").parameter("graph_optimization_level", "basic")
                .parameter("enable_mem_arena", "false").parameter("session.intra_op.allow_spinning", "0")
                .parameter("batcher", "none").parameter("execute_timeout_ms", "5000") // the host's
                .parameter("execute_delay_ms", "100").build(); // another backend's (Triton's simple_dyna_sequence carries it): ignored
        try (ModelHarness m = TestModels.start(c)) {
            assertFalse(m.infer(TestModels.request("add_sub", floats("INPUT0", 1, 4), floats("INPUT1", 1, 4))).isError());
        }
    }

    @Test
    void autoComplete_configWithoutTensors_filledFromModel() throws Exception {
        ModelConfig bare = ModelConfig.builder("add_sub").platform("onnxruntime_onnx").maxBatchSize(8).build();
        try (ModelHarness m = TestModels.start(bare)) {
            assertEquals(TestModels.addSub().inputs(), m.config().inputs());
            assertEquals(TestModels.addSub().outputs(), m.config().outputs());
            assertFalse(m.infer(TestModels.request("add_sub", floats("INPUT0", 1, 4), floats("INPUT1", 1, 4))).isError());
        }
        try (ModelHarness m = TestModels.start(bare.toBuilder().maxBatchSize(0).build())) {
            assertEquals(List.of(-1L, 4L), m.config().input("INPUT0").dims());
        }
    }

    @Test
    void load_fileIsNotOnnx_failsClearlyAndOtherModelsKeepServing() throws Exception {
        try (ModelHarness good = TestModels.start(TestModels.addSub())) {
            ModelConfig notOnnx = ModelConfig.builder("not_onnx").platform("onnxruntime_onnx").build();
            BackplaneException e = loadFails(notOnnx);
            assertError(e, ErrorCode.INVALID_ARGUMENT, "model 'not_onnx' version 1", "cannot load", "not_onnx/1/model.onnx", "as an ONNX model");
            assertFalse(good.infer(TestModels.request("add_sub", floats("INPUT0", 1, 4), floats("INPUT1", 1, 4))).isError());
        }
    }

    @Test
    void load_missingFile_failsNamingThePath() {
        ModelConfig c = TestModels.addSub().toBuilder().defaultModelFilename("other.onnx").build();
        assertError(loadFails(c), ErrorCode.NOT_FOUND, "add_sub/1/other.onnx", "default_model_filename");
        ModelConfig escape = TestModels.addSub().toBuilder().defaultModelFilename("../config.pbtxt").build();
        assertError(loadFails(escape), ErrorCode.INVALID_ARGUMENT, "default_model_filename", "'../config.pbtxt' is not a plain file name");
    }
}
