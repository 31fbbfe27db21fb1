package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.List;
import org.junit.jupiter.api.Test;

class LaunchSpecTest {
    private static ModelConfig.Builder saxpy() {
        return ModelConfig.builder("m").backend("cuda").maxBatchSize(8)
                .input(TensorConfig.of("X", DataType.FP32, -1)).input(TensorConfig.of("Y", DataType.FP32, -1))
                .output(TensorConfig.of("OUT", DataType.FP32, -1))
                .parameter("kernel", "saxpy").parameter("kernel_args", "count, fp32:2.0, input:X, input:Y, output:OUT");
    }

    private static String invalid(ModelConfig.Builder b) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> LaunchSpec.from(b.build()));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        return e.getMessage();
    }

    @Test
    void from_sampleConfig_readsKernelArgsAndBlockSize() {
        LaunchSpec spec = LaunchSpec.from(Fixtures.sampleConfig());
        assertEquals("saxpy", spec.kernel());
        assertEquals(256, spec.blockSize());
        assertEquals("saxpy.ptx", spec.moduleFile());
        assertEquals(List.of(new LaunchSpec.CountArg(false), new LaunchSpec.ScalarArg(new KernelArg.Float32(2.0f)),
                new LaunchSpec.InputArg("X"), new LaunchSpec.InputArg("Y"), new LaunchSpec.OutputArg("OUT")), spec.args());
        assertEquals(List.of(4, 4, 8, 8, 8), spec.argumentSizes());
    }

    @Test
    void from_everyScalarKind_parses() {
        LaunchSpec spec = LaunchSpec.from(saxpy().parameter("kernel_args", "count:int64, int32:-3, int64:9000000000, fp32:1e-3, fp64:0.5,"
                + " input:X, input:Y, output:OUT").parameter("block_size", "128").build());
        assertEquals(List.of(8, 4, 8, 4, 8, 8, 8, 8), spec.argumentSizes());
        assertEquals(new LaunchSpec.ScalarArg(new KernelArg.Int64(9_000_000_000L)), spec.args().get(2));
        assertEquals(128, spec.blockSize());
    }

    @Test
    void from_missingKernel_namesTheParameter() {
        assertTrue(invalid(saxpy().parameter("kernel", " ")).contains("needs parameter 'kernel'"));
        assertTrue(invalid(saxpy().parameter("kernel", "sa xpy")).contains("'sa xpy' is not a kernel entry name"));
    }

    @Test
    void from_missingArgs_showsAnExample() {
        assertTrue(invalid(saxpy().parameter("kernel_args", "")).contains("needs parameter 'kernel_args'"));
    }

    @Test
    void from_badItems_areNamed() {
        assertTrue(invalid(saxpy().parameter("kernel_args", "count, input:Z, input:X, input:Y, output:OUT"))
                .contains("item 'input:Z' names no declared input; declared inputs: [X, Y]"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "input:X, input:X, input:Y, output:OUT")).contains("'X' is passed twice"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "count, count, input:X, input:Y, output:OUT")).contains("'count' is passed twice"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "count:int16, input:X, input:Y, output:OUT")).contains("count:int64"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "pointer:X, input:Y, output:OUT")).contains("unknown argument kind 'pointer'"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "fp32:two, input:X, input:Y, output:OUT")).contains("'two' is not a fp32 value"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "int32:, input:X, input:Y, output:OUT")).contains("needs a value"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "input:X,, input:Y, output:OUT")).contains("has an empty item"));
    }

    @Test
    void from_declaredTensorNotPassed_isAnError() {
        assertTrue(invalid(saxpy().parameter("kernel_args", "count, input:X, output:OUT"))
                .contains("input 'Y' is declared but not passed to the kernel"));
        assertTrue(invalid(saxpy().parameter("kernel_args", "count, input:X, input:Y")).contains("passes no output"));
        assertTrue(invalid(saxpy().output(TensorConfig.of("EXTRA", DataType.FP32, -1)))
                .contains("output 'EXTRA' is declared but not passed"));
    }

    @Test
    void from_tensorsOfDifferentDims_isAnError() {
        String m = invalid(saxpy().clearInputs().input(TensorConfig.of("X", DataType.FP32, 4)).input(TensorConfig.of("Y", DataType.FP32, -1)));
        assertTrue(m.contains("'Y' has dims [-1] but 'X' has [4]") && m.contains("element-wise"), m);
    }

    @Test
    void from_stringTensor_isAnError() {
        assertTrue(invalid(saxpy().clearOutputs().output(TensorConfig.of("OUT", DataType.BYTES, -1))).contains("TYPE_STRING"));
    }

    @Test
    void from_blockSizeOutOfRange_isAnError() {
        assertTrue(invalid(saxpy().parameter("block_size", "0")).contains("out of range; use 1..1024"));
        assertTrue(invalid(saxpy().parameter("block_size", "2048")).contains("out of range"));
        assertTrue(invalid(saxpy().parameter("block_size", "big")).contains("'big' is not an integer"));
    }

    @Test
    void from_moduleFileWithPath_isAnError() {
        assertTrue(invalid(saxpy().parameter("module_file", "../other/m.ptx")).contains("without a path"));
    }
}
