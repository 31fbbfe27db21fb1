package io.backplane.spi;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.List;
import org.junit.jupiter.api.Test;

class TensorTest {
    @Test
    void ofFloats_roundTrips_littleEndian() {
        Tensor t = Tensor.ofFloats("x", new long[] {2, 2}, 1f, 2f, 3f, 4f);
        assertArrayEquals(new float[] {1f, 2f, 3f, 4f}, t.toFloatArray());
        assertEquals(16, t.byteSize());
        assertEquals((byte) 0x40, t.toByteArray()[7]); // 2.0f = 0x40000000, stored little-endian
        assertEquals(4, t.elementCount());
    }

    @Test
    void of_sizeMismatch_namesTensorAndBytes() {
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> Tensor.of("in", DataType.INT32, new long[] {3}, MemorySegment.ofArray(new byte[8])));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'in'") && e.getMessage().contains("12 bytes") && e.getMessage().contains("8"), e.getMessage());
    }

    @Test
    void ofStrings_roundTrips() {
        Tensor t = Tensor.ofStrings("s", new long[] {3}, "a", "", "héllo");
        assertEquals(List.of("a", "", "héllo"), t.toStringList());
    }

    @Test
    void bytes_truncatedLength_isRejected() {
        byte[] raw = {10, 0, 0, 0, 1, 2};
        BackplaneException e = assertThrows(BackplaneException.class, () -> Tensor.ofRaw("b", DataType.BYTES, new long[] {1}, raw));
        assertTrue(e.getMessage().contains("claims 10 bytes"), e.getMessage());
    }

    @Test
    void negativeDimension_isRejected() {
        assertThrows(BackplaneException.class, () -> Tensor.ofFloats("x", new long[] {-1}, 1f));
    }

    @Test
    void fp16AndBf16_widenToFloat() {
        short one16 = Float.floatToFloat16(1.5f);
        Tensor h = Tensor.ofRaw("h", DataType.FP16, new long[] {1}, new byte[] {(byte) one16, (byte) (one16 >> 8)});
        assertArrayEquals(new float[] {1.5f}, h.toFloatArray());
        int bits = Float.floatToIntBits(-2.0f) >>> 16;
        Tensor b = Tensor.ofRaw("b", DataType.BF16, new long[] {1}, new byte[] {(byte) bits, (byte) (bits >> 8)});
        assertArrayEquals(new float[] {-2.0f}, b.toFloatArray());
    }

    @Test
    void gpuTensor_refusesHostReads() {
        Tensor g = Tensor.of("g", DataType.FP32, new long[] {1}, MemorySegment.ofArray(new byte[4]), MemoryType.GPU, 1);
        assertThrows(IllegalStateException.class, g::toFloatArray);
        assertEquals(1, g.deviceId());
    }

    @Test
    void dataType_names() {
        assertEquals(DataType.BYTES, DataType.fromConfigName("TYPE_STRING"));
        assertEquals(DataType.BF16, DataType.fromConfigName("TYPE_BF16"));
        assertEquals(DataType.FP32, DataType.fromProtocolName("fp32"));
        assertThrows(BackplaneException.class, () -> DataType.fromConfigName("TYPE_BYTES"));
        assertThrows(BackplaneException.class, () -> DataType.fromProtocolName("FLOAT"));
    }

    @Test
    void ofFloat16sAndBFloat16s_roundTripRepresentableValues() {
        float[] values = {0f, 1f, -2.5f, 65504f, Float.POSITIVE_INFINITY};
        assertArrayEquals(values, Tensor.ofFloat16s("h", new long[] {5}, values).toFloatArray());
        float[] bf = {0f, 1f, -2.5f, 3.0e38f, Float.NEGATIVE_INFINITY};
        float[] back = Tensor.ofBFloat16s("b", new long[] {5}, bf).toFloatArray();
        assertEquals(DataType.BF16, Tensor.ofBFloat16s("b", new long[] {5}, bf).dataType());
        for (int i = 0; i < bf.length; i++) {
            assertEquals(bf[i], back[i], Math.abs(bf[i]) / 128, "bf16 keeps 8 bits of mantissa: " + bf[i]);
        }
    }

    @Test
    void toBf16Bits_roundsToNearestEven_andKeepsNaN() {
        assertEquals((short) 0x3F80, Tensor.toBf16Bits(1f));
        assertEquals((short) 0x3F80, Tensor.toBf16Bits(Float.intBitsToFloat(0x3F808000)), "a tie rounds to the even neighbour");
        assertEquals((short) 0x3F82, Tensor.toBf16Bits(Float.intBitsToFloat(0x3F818000)), "a tie rounds to the even neighbour, up");
        assertTrue(Float.isNaN(Tensor.fromBf16Bits(Tensor.toBf16Bits(Float.NaN))));
        assertEquals(1f, Tensor.fromBf16Bits((short) 0x3F80));
    }

    @Test
    void elementCount_overflowingShape_invalidArgumentNamingTensorAndShape() {
        long[] shape = new long[10];
        java.util.Arrays.fill(shape, 1L << 31);
        BackplaneException e = assertThrows(BackplaneException.class, () -> Tensor.elementCount("INPUT0", shape));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().startsWith("tensor 'INPUT0': shape [2147483648, 2147483648,") && e.getMessage().contains("more than 2^63-1 elements"),
                e.getMessage());
        assertEquals(0, Tensor.elementCount("INPUT0", new long[] {1L << 40, 1L << 40, 0}), "a zero dimension makes it empty, overflow or not");
    }

    @Test
    void of_elementsFitButBytesOverflow_invalidArgumentNamingTheBytes() {
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> Tensor.of("INPUT0", DataType.FP64, new long[] {1L << 61}, MemorySegment.ofArray(new byte[8])));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'INPUT0'") && e.getMessage().contains("more than 2^63-1 bytes"), e.getMessage());
    }
}
