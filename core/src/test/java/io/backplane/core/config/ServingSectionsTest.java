package io.backplane.core.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ConfigNode;
import io.backplane.spi.config.ModelConfig;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The Triton fields {@link ServingSections} checks: format, label_filename, model_warmup, response_cache, optimization. */
class ServingSectionsTest {
    /** Triton's quick-start densenet_onnx config, as its documentation gives it. */
    static final String DENSENET = """
            name: "densenet_onnx"
            platform: "onnxruntime_onnx"
            max_batch_size : 0
            input [
              {
                name: "data_0"
                data_type: TYPE_FP32
                format: FORMAT_NCHW
                dims: [ 3, 224, 224 ]
                reshape { shape: [ 1, 3, 224, 224 ] }
              }
            ]
            output [
              {
                name: "fc6_1"
                data_type: TYPE_FP32
                dims: [ 1000 ]
                reshape { shape: [ 1, 1000, 1, 1 ] }
                label_filename: "densenet_labels.txt"
              }
            ]
            """;

    private static ModelConfig parse(String text, String name) {
        return ModelConfigParser.parse(text, name + "/config.pbtxt", name, ModelConfigParserTest.CATALOG);
    }

    private static String invalid(String text) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> parse(text, "m"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        return e.getMessage();
    }

    private static void assertContains(String message, String... parts) {
        for (String p : parts) {
            assertTrue(message.contains(p), () -> "expected '" + p + "' in: " + message);
        }
    }

    @Test
    void parse_tritonDensenetQuickStartConfig_loadsWithFormatAndLabelsInTheRawView() {
        ModelConfig c = parse(DENSENET, "densenet_onnx");

        ConfigNode in = c.raw().sections("input").getFirst();
        assertEquals("FORMAT_NCHW", in.value("format").orElseThrow());
        assertEquals("densenet_labels.txt", c.raw().sections("output").getFirst().value("label_filename").orElseThrow());
        assertEquals(List.of(1L, 1000L, 1L, 1L), c.output("fc6_1").reshape());
    }

    @Test
    void parse_imageFormatWithoutThreeDims_isRefusedWithPosition() {
        String m = invalid("""
                name: "m"
                backend: "python"
                input [ { name: "a" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 3, 4 ] } ]
                """);
        assertContains(m, "m/config.pbtxt:3:", "field 'format'", "FORMAT_NHWC needs 3 dims", "[3, 4]");
    }

    @Test
    void parse_labelFilenameOutsideTheModelDirectory_isRefused() {
        for (String bad : List.of("../labels.txt", "/etc/passwd", "a/../../x")) {
            String m = invalid("""
                    name: "m"
                    backend: "python"
                    output [ { name: "o" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "%s" } ]
                    """.formatted(bad));
            assertContains(m, "m/config.pbtxt:3:", "field 'label_filename'", "'" + bad + "'", "no absolute path, no '..'");
        }
    }

    @Test
    void parse_warmupSamples_checkedWithTheSampleNamed() {
        String head = """
                name: "m"
                backend: "python"
                max_batch_size: 4
                input [ { name: "a" data_type: TYPE_FP32 dims: [ 3 ] } ]
                """;
        assertContains(invalid(head + "model_warmup [ { batch_size: 1 inputs { key: \"a\" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } } ]"),
                "m/config.pbtxt:5:", "has no name");
        String sample = "{ name: \"w\" batch_size: 1 inputs { key: \"a\" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } }";
        assertContains(invalid(head + "model_warmup [ " + sample + ", " + sample + " ]"), "'w' is used twice");
        assertContains(invalid(head + "model_warmup [ { name: \"big\" batch_size: 5 inputs { key: \"a\" value: { data_type: TYPE_FP32 dims: [ 3 ]"
                + " zero_data: true } } } ]"), "warm-up sample 'big': batch_size 5 must be between 1 and 4");
        assertContains(invalid(head + "model_warmup [ { name: \"nodata\" batch_size: 1 inputs { key: \"a\" value: { data_type: TYPE_FP32 dims: [ 3 ] } } } ]"),
                "warm-up sample 'nodata' input 'a' says nothing about its data", "zero_data: true");
        assertContains(invalid(head + "model_warmup [ { name: \"esc\" batch_size: 1 inputs { key: \"a\" value: { data_type: TYPE_FP32 dims: [ 3 ]"
                + " input_data_file: \"../../secret\" } } } ]"), "warm-up sample 'esc' input 'a'", "'../../secret'");
        assertContains(invalid(head + "model_warmup [ { name: \"dyn\" batch_size: 1 inputs { key: \"a\" value: { data_type: TYPE_FP32 dims: [ -1 ]"
                + " zero_data: true } } } ]"), "warm-up sample 'dyn' input 'a'", "must all be ≥ 1");
    }

    @Test
    void parse_optimizationAndResponseCache_areAccepted_cacheOnADecoupledModelIsRefused() {
        ModelConfig c = parse("""
                name: "m"
                backend: "python"
                optimization { priority: PRIORITY_MAX cuda { graphs: true } }
                response_cache { enable: true }
                """, "m");
        assertEquals("PRIORITY_MAX", c.section("optimization").orElseThrow().value("priority").orElseThrow());
        assertEquals("true", c.section("response_cache").orElseThrow().value("enable").orElseThrow());

        assertContains(invalid("""
                name: "m"
                backend: "python"
                model_transaction_policy { decoupled: true }
                response_cache { enable: true }
                """), "m/config.pbtxt:4:", "field 'response_cache'", "decoupled");
    }
}
