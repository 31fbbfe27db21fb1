package io.backplane.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Tensor;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class TensorFillTest {
    private static final long[] TWO = {2};

    @Test
    void of_countDoesNotMatchShape_namesInputShapeAndBothCounts() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> TensorFill.of("IN0", DataType.FP32, new long[] {3}, 2));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("input 'IN0' (FP32): shape [3] needs 3 elements but the data has 2"), e.getMessage());
    }

    @Test
    void of_elementsFitButBytesOverflow_namesInputCountAndTypeSizeInTritonsWords() {
        // [4, 2^60 + 2] FP32: 2^62 + 8 elements fit in a long, their 4-byte elements do not (Triton's QA http_test)
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> TensorFill.of("INPUT0", DataType.FP32, new long[] {4, (1L << 60) + 2}, 1));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().startsWith("byte size overflow for input 'INPUT0': element count (4611686018427387912) * data type size (4)"),
                e.getMessage());
    }

    @Test
    void of_bytes_isRefused_bytesTensorsHaveVariableLengthElements() {
        assertThrows(IllegalArgumentException.class, () -> TensorFill.of("s", DataType.BYTES, TWO, 2));
        assertEquals(2, TensorFill.requireElements("s", DataType.BYTES, TWO, 2));
    }

    @Test
    void integers_writeLittleEndianValues() {
        Tensor t = TensorFill.of("x", DataType.INT16, TWO, 2).setLong(0, -2).setUnsignedLong(1, 300).build();
        assertEquals(-2, t.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0));
        assertEquals(300, t.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 1));
        assertArrayEquals(new long[] {2}, t.shape());
        assertEquals(DataType.INT16, t.dataType());
    }

    @Test
    void uint64_takesEveryBitPattern_fromUnsignedBits() {
        Tensor t = TensorFill.of("u", DataType.UINT64, TWO, 2).setUnsignedLong(0, -1L).setLong(1, 7).build();
        assertEquals(-1L, t.data().getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0));
        assertEquals(7L, t.data().getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 1));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {"INT8|128|[-128, 127]", "UINT8|-1|[0, 255]", "UINT8|300|[0, 255]", "INT16|40000|[-32768, 32767]",
            "UINT32|4294967296|[0, 4294967295]", "BOOL|2|[0, 1]", "UINT64|-5|[0, 18446744073709551615]"})
    void setLong_outOfRange_namesInputElementValueAndRange(DataType type, long value, String range) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> TensorFill.of("v", type, TWO, 2).setLong(1, value));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertEquals("input 'v' (" + type + "): element 1 is " + value + ", outside " + range, e.getMessage());
    }

    @Test
    void setUnsignedLong_aboveLongMax_intoASmallerType_isOutOfRange() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> TensorFill.of("v", DataType.INT64, TWO, 2).setUnsignedLong(0, -1L));
        assertTrue(e.getMessage().contains("element 0 is 18446744073709551615, outside"), e.getMessage());
    }

    @Test
    void floats_roundToTheirPrecision_fp16AndBf16TiesToEven() {
        Tensor h = TensorFill.of("h", DataType.FP16, TWO, 2).setDouble(0, 1.5).setLong(1, 3).build();
        assertEquals(1.5f, Float.float16ToFloat(h.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0)));
        assertEquals(3f, Float.float16ToFloat(h.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 1)));
        // 1 + 2^-8 lies halfway between the bfloat16 values 1 and 1 + 2^-7: ties to even gives 1.
        Tensor b = TensorFill.of("b", DataType.BF16, TWO, 2).setDouble(0, 1 + Math.scalb(1.0, -8)).setDouble(1, Double.NaN).build();
        short one = b.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
        short nan = b.data().getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 1);
        assertEquals(1f, Float.intBitsToFloat((one & 0xFFFF) << 16));
        assertTrue(Float.isNaN(Float.intBitsToFloat((nan & 0xFFFF) << 16)));
        Tensor d = TensorFill.of("d", DataType.FP64, new long[] {1}, 1).setDouble(0, 0.1).build();
        assertEquals(0.1, d.data().getAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0));
    }

    @Test
    void wrongKindOfValue_isAnError_namingWhatWasExpected() {
        BackplaneException real = assertThrows(BackplaneException.class, () -> TensorFill.of("i", DataType.INT32, TWO, 2).setDouble(0, 1.5));
        assertEquals("input 'i' (INT32): element 0 is 1.5, expected an integer", real.getMessage());
        BackplaneException bool = assertThrows(BackplaneException.class, () -> TensorFill.of("f", DataType.FP32, TWO, 2).setBoolean(1, true));
        assertEquals("input 'f' (FP32): element 1 is true, expected a number", bool.getMessage());
        Tensor ok = TensorFill.of("b", DataType.BOOL, TWO, 2).setBoolean(0, true).setLong(1, 0).build();
        assertEquals(1, ok.data().get(ValueLayout.JAVA_BYTE, 0));
        assertEquals(0, ok.data().get(ValueLayout.JAVA_BYTE, 1));
    }
}
