package io.backplane.protocol;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Builds a host tensor from element values as a protocol carries them one by one (JSON numbers,
 * the typed contents of a gRPC request): checks the element count against the shape and every
 * value against its datatype's range, and writes the little-endian bytes a backend reads. An error
 * is INVALID_ARGUMENT naming the input, the element and the value. Not thread-safe: one request
 * fills one instance on one thread.
 *
 * <p>BYTES elements have variable length; build those with {@link Tensor#ofBytes} after
 * {@link #requireElements}.
 */
public final class TensorFill {
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final String name;
    private final DataType type;
    private final long[] shape;
    private final int size;
    private final MemorySegment data;

    private TensorFill(String name, DataType type, long[] shape, int size) {
        this.name = name;
        this.type = type;
        this.shape = shape;
        this.size = size;
        this.data = MemorySegment.ofArray(new byte[Math.multiplyExact(size, type.byteSize())]);
    }

    /**
     * A zero-filled tensor of {@code count} elements to fill.
     *
     * @throws BackplaneException INVALID_ARGUMENT when {@code count} is not the element count of {@code shape}
     * @throws IllegalArgumentException for BYTES (variable-length elements: use {@link Tensor#ofBytes})
     */
    public static TensorFill of(String name, DataType type, long[] shape, long count) {
        if (requireNonNull(type, "type is null") == DataType.BYTES) {
            throw new IllegalArgumentException("BYTES elements have variable length; build the tensor with Tensor.ofBytes");
        }
        long n = requireElements(name, type, shape, count);
        if (n > (Integer.MAX_VALUE - 8) / type.byteSize()) {
            throw BackplaneException.invalid("input '" + name + "': " + n + " " + type + " elements do not fit in one host buffer; send a smaller tensor");
        }
        return new TensorFill(name, type, shape.clone(), (int) n);
    }

    /**
     * Checks that {@code count} elements fill {@code shape}.
     *
     * @return the element count of {@code shape}
     * @throws BackplaneException INVALID_ARGUMENT naming the input, its shape and both counts, or the byte size that no
     *     tensor of {@code type} can have
     */
    public static long requireElements(String name, DataType type, long[] shape, long count) {
        requireNonNull(name, "name is null");
        requireNonNull(type, "type is null");
        long expected = Tensor.elementCount(name, shape);
        if (type.isFixedSize() && expected > Long.MAX_VALUE / type.byteSize()) {
            // Triton's words (its QA matches them), then what to do.
            throw BackplaneException.invalid("byte size overflow for input '" + name + "': element count (" + expected + ") * data type size ("
                    + type.byteSize() + ") exceeds maximum allowed size (" + Long.MAX_VALUE + "); check the shape " + Arrays.toString(shape));
        }
        if (expected != count) {
            throw BackplaneException.invalid("input '" + name + "' (" + type + "): shape " + Arrays.toString(shape) + " needs " + expected
                    + " elements but the data has " + count);
        }
        return expected;
    }

    /** The number of elements. */
    public int size() {
        return size;
    }

    /** Element {@code i} of a BOOL tensor. */
    public TensorFill setBoolean(int i, boolean value) {
        if (type != DataType.BOOL) {
            throw wrongKind(i, Boolean.toString(value), "a number");
        }
        data.set(ValueLayout.JAVA_BYTE, i, (byte) (value ? 1 : 0));
        return this;
    }

    /**
     * Element {@code i} from a signed integer: BOOL takes 0 or 1, an integer type any value in its
     * range, UINT64 any value ≥ 0, a floating-point type the nearest value.
     */
    public TensorFill setLong(int i, long value) {
        switch (type) {
            case BOOL -> data.set(ValueLayout.JAVA_BYTE, i, (byte) range(i, value, 0, 1));
            case INT8 -> data.set(ValueLayout.JAVA_BYTE, i, (byte) range(i, value, Byte.MIN_VALUE, Byte.MAX_VALUE));
            case UINT8 -> data.set(ValueLayout.JAVA_BYTE, i, (byte) range(i, value, 0, 0xFF));
            case INT16 -> data.setAtIndex(SHORT, i, (short) range(i, value, Short.MIN_VALUE, Short.MAX_VALUE));
            case UINT16 -> data.setAtIndex(SHORT, i, (short) range(i, value, 0, 0xFFFF));
            case INT32 -> data.setAtIndex(INT, i, (int) range(i, value, Integer.MIN_VALUE, Integer.MAX_VALUE));
            case UINT32 -> data.setAtIndex(INT, i, (int) range(i, value, 0, 0xFFFF_FFFFL));
            case INT64 -> data.setAtIndex(LONG, i, value);
            case UINT64 -> data.setAtIndex(LONG, i, range(i, value, 0, Long.MAX_VALUE));
            case FP16, BF16, FP32, FP64 -> setDouble(i, value);
            case BYTES -> throw new AssertionError("TensorFill never holds BYTES");
        }
        return this;
    }

    /**
     * Element {@code i} from an unsigned 64-bit integer given by its bits (protobuf's uint32 and
     * uint64 fields): any integer type takes it when it is in its range.
     */
    public TensorFill setUnsignedLong(int i, long bits) {
        if (type == DataType.UINT64) {
            data.setAtIndex(LONG, i, bits);
            return this;
        }
        if (bits < 0) {
            throw outOfRange(i, Long.toUnsignedString(bits));
        }
        return setLong(i, bits);
    }

    /**
     * Element {@code i} of a floating-point tensor, rounded to its precision (FP16 and BF16 to the
     * nearest value, ties to even).
     */
    public TensorFill setDouble(int i, double value) {
        switch (type) {
            case FP16 -> data.setAtIndex(SHORT, i, Float.floatToFloat16((float) value));
            case BF16 -> data.setAtIndex(SHORT, i, Tensor.toBf16Bits((float) value));
            case FP32 -> data.setAtIndex(FLOAT, i, (float) value);
            case FP64 -> data.setAtIndex(DOUBLE, i, value);
            default -> throw wrongKind(i, Double.toString(value), type == DataType.BOOL ? "true or false" : "an integer");
        }
        return this;
    }

    /** The tensor; call once, after every element is set. */
    public Tensor build() {
        return Tensor.of(name, type, shape, data);
    }

    private long range(int i, long value, long min, long max) {
        if (value < min || value > max) {
            throw outOfRange(i, Long.toString(value));
        }
        return value;
    }

    private BackplaneException outOfRange(int i, String value) {
        String range = switch (type) {
            case BOOL -> "[0, 1]";
            case INT8 -> "[-128, 127]";
            case UINT8 -> "[0, 255]";
            case INT16 -> "[-32768, 32767]";
            case UINT16 -> "[0, 65535]";
            case INT32 -> "[" + Integer.MIN_VALUE + ", " + Integer.MAX_VALUE + "]";
            case UINT32 -> "[0, 4294967295]";
            case INT64 -> "[" + Long.MIN_VALUE + ", " + Long.MAX_VALUE + "]";
            default -> "[0, 18446744073709551615]";
        };
        return BackplaneException.invalid("input '" + name + "' (" + type + "): element " + i + " is " + value + ", outside " + range);
    }

    private BackplaneException wrongKind(int i, String value, String expected) {
        return BackplaneException.invalid("input '" + name + "' (" + type + "): element " + i + " is " + value + ", expected " + expected);
    }
}
