package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A named, typed, shaped block of tensor data. Immutable in its metadata; the bytes are a
 * {@link MemorySegment} whose layout is fixed by {@link DataType} (little-endian, row-major;
 * BYTES as 4-byte length-prefixed elements).
 *
 * <p><b>Ownership.</b> Whoever builds a tensor guarantees that its segment stays valid and
 * unchanged for as long as any holder of the tensor may read it. A backend that answers from a
 * buffer it will reuse (a shared-memory pool, a device allocation) must copy into memory it
 * hands over, e.g. with {@link #copyToHeap()}.
 *
 * <p>Instances are thread-safe to read.
 */
public final class Tensor {
    private static final ValueLayout.OfShort LE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat LE_FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble LE_DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final String name;
    private final DataType dataType;
    private final long[] shape;
    private final MemorySegment data;
    private final MemoryType memoryType;
    private final int deviceId;
    private final long elementCount;

    private Tensor(String name, DataType dataType, long[] shape, MemorySegment data, MemoryType memoryType, int deviceId) {
        this.name = requireNonNull(name, "name is null");
        this.dataType = requireNonNull(dataType, "dataType is null");
        this.data = requireNonNull(data, "data is null");
        this.memoryType = requireNonNull(memoryType, "memoryType is null");
        this.shape = requireNonNull(shape, "shape is null").clone();
        if (name.isEmpty()) {
            throw BackplaneException.invalid("tensor name is empty");
        }
        if (deviceId < 0) {
            throw BackplaneException.invalid("tensor '" + name + "': device id " + deviceId + " is negative");
        }
        this.elementCount = elementCount(name, this.shape);
        this.deviceId = deviceId;
        if (dataType.isFixedSize()) {
            long expected;
            try {
                expected = Math.multiplyExact(elementCount, dataType.byteSize());
            } catch (ArithmeticException overflow) {
                throw BackplaneException.invalid("tensor '" + name + "': " + dataType + " shape " + Arrays.toString(this.shape) + " needs more than"
                        + " 2^63-1 bytes; no tensor can be that large: send a smaller shape");
            }
            if (data.byteSize() != expected) {
                throw BackplaneException.invalid("tensor '" + name + "': " + dataType + " shape " + Arrays.toString(this.shape)
                        + " needs " + expected + " bytes but the data has " + data.byteSize());
            }
        } else if (memoryType != MemoryType.GPU) {
            long found = countBytesElements(name, data);
            if (found != elementCount) {
                throw BackplaneException.invalid("tensor '" + name + "': BYTES shape " + Arrays.toString(this.shape)
                        + " needs " + elementCount + " elements but the data holds " + found);
            }
        }
    }

    /**
     * A host-memory tensor over {@code data}, which must hold exactly the bytes the shape needs.
     *
     * @throws BackplaneException INVALID_ARGUMENT when shape and data disagree (named in the message)
     */
    public static Tensor of(String name, DataType dataType, long[] shape, MemorySegment data) {
        return new Tensor(name, dataType, shape, data, MemoryType.CPU, 0);
    }

    /** A tensor in the given memory; for {@link MemoryType#GPU} the segment holds a device pointer. */
    public static Tensor of(String name, DataType dataType, long[] shape, MemorySegment data, MemoryType memoryType, int deviceId) {
        return new Tensor(name, dataType, shape, data, memoryType, deviceId);
    }

    /** A host tensor over a copy of {@code bytes}, laid out as {@link DataType} says. */
    public static Tensor ofRaw(String name, DataType dataType, long[] shape, byte[] bytes) {
        return of(name, dataType, shape, MemorySegment.ofArray(bytes.clone()));
    }

    public static Tensor ofFloats(String name, long[] shape, float... values) {
        MemorySegment s = MemorySegment.ofArray(new byte[values.length * 4]);
        MemorySegment.copy(values, 0, s, LE_FLOAT, 0, values.length);
        return of(name, DataType.FP32, shape, s);
    }

    /** An FP16 tensor; each value is rounded to the nearest half-precision float (ties to even). */
    public static Tensor ofFloat16s(String name, long[] shape, float... values) {
        MemorySegment s = MemorySegment.ofArray(new byte[values.length * 2]);
        for (int i = 0; i < values.length; i++) {
            s.setAtIndex(LE_SHORT, i, Float.floatToFloat16(values[i]));
        }
        return of(name, DataType.FP16, shape, s);
    }

    /** A BF16 tensor; each value is rounded with {@link #toBf16Bits(float)}. */
    public static Tensor ofBFloat16s(String name, long[] shape, float... values) {
        MemorySegment s = MemorySegment.ofArray(new byte[values.length * 2]);
        for (int i = 0; i < values.length; i++) {
            s.setAtIndex(LE_SHORT, i, toBf16Bits(values[i]));
        }
        return of(name, DataType.BF16, shape, s);
    }

    /**
     * The bfloat16 bits of {@code f}: rounded to nearest, ties to even; a NaN stays a (quiet) NaN,
     * infinities stay infinite. The inverse of {@link #fromBf16Bits(short)} for values bfloat16
     * can hold.
     */
    public static short toBf16Bits(float f) {
        int bits = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) {
            return (short) ((bits >>> 16) | 0x40);
        }
        return (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
    }

    /** The float a bfloat16 value (its 16 bits) stands for; exact. */
    public static float fromBf16Bits(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    public static Tensor ofDoubles(String name, long[] shape, double... values) {
        MemorySegment s = MemorySegment.ofArray(new byte[values.length * 8]);
        MemorySegment.copy(values, 0, s, LE_DOUBLE, 0, values.length);
        return of(name, DataType.FP64, shape, s);
    }

    public static Tensor ofInts(String name, long[] shape, int... values) {
        MemorySegment s = MemorySegment.ofArray(new byte[values.length * 4]);
        MemorySegment.copy(values, 0, s, LE_INT, 0, values.length);
        return of(name, DataType.INT32, shape, s);
    }

    public static Tensor ofLongs(String name, long[] shape, long... values) {
        MemorySegment s = MemorySegment.ofArray(new byte[values.length * 8]);
        MemorySegment.copy(values, 0, s, LE_LONG, 0, values.length);
        return of(name, DataType.INT64, shape, s);
    }

    public static Tensor ofBooleans(String name, long[] shape, boolean... values) {
        byte[] b = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            b[i] = (byte) (values[i] ? 1 : 0);
        }
        return of(name, DataType.BOOL, shape, MemorySegment.ofArray(b));
    }

    /** A BYTES tensor with one element per entry of {@code elements}. */
    public static Tensor ofBytes(String name, long[] shape, List<byte[]> elements) {
        long total = 0;
        for (byte[] e : elements) {
            total += 4L + e.length;
        }
        byte[] out = new byte[Math.toIntExact(total)];
        MemorySegment s = MemorySegment.ofArray(out);
        long off = 0;
        for (byte[] e : elements) {
            s.set(LE_INT, off, e.length);
            MemorySegment.copy(e, 0, s, ValueLayout.JAVA_BYTE, off + 4, e.length);
            off += 4L + e.length;
        }
        return of(name, DataType.BYTES, shape, s);
    }

    /** A BYTES tensor of UTF-8 strings. */
    public static Tensor ofStrings(String name, long[] shape, String... values) {
        List<byte[]> els = new ArrayList<>(values.length);
        for (String v : values) {
            els.add(v.getBytes(StandardCharsets.UTF_8));
        }
        return ofBytes(name, shape, els);
    }

    public String name() {
        return name;
    }

    public DataType dataType() {
        return dataType;
    }

    /** A copy of the shape; every dimension is ≥ 0. */
    public long[] shape() {
        return shape.clone();
    }

    /** Dimension {@code i} of the shape. */
    public long dim(int i) {
        return shape[i];
    }

    /** The number of dimensions. */
    public int rank() {
        return shape.length;
    }

    /** The product of the shape (1 for a scalar). */
    public long elementCount() {
        return elementCount;
    }

    /** The segment holding the data; see the class comment for ownership. */
    public MemorySegment data() {
        return data;
    }

    public long byteSize() {
        return data.byteSize();
    }

    public MemoryType memoryType() {
        return memoryType;
    }

    /** The device ordinal for {@link MemoryType#GPU}; 0 otherwise. */
    public int deviceId() {
        return deviceId;
    }

    /** The same data under another name. */
    public Tensor withName(String newName) {
        return new Tensor(newName, dataType, shape, data, memoryType, deviceId);
    }

    /** The same data under another shape with the same element count. */
    public Tensor withShape(long[] newShape) {
        return new Tensor(name, dataType, newShape, data, memoryType, deviceId);
    }

    /** A tensor over a fresh heap copy of the data; host memory only. */
    public Tensor copyToHeap() {
        requireHost();
        return new Tensor(name, dataType, shape, MemorySegment.ofArray(data.toArray(ValueLayout.JAVA_BYTE)), MemoryType.CPU, 0);
    }

    /** The raw bytes (a copy); host memory only. */
    public byte[] toByteArray() {
        requireHost();
        return data.toArray(ValueLayout.JAVA_BYTE);
    }

    /** FP32 values; FP16 and BF16 are widened. */
    public float[] toFloatArray() {
        requireHost();
        int n = Math.toIntExact(elementCount);
        float[] out = new float[n];
        switch (dataType) {
            case FP32 -> MemorySegment.copy(data, LE_FLOAT, 0, out, 0, n);
            case FP16 -> {
                for (int i = 0; i < n; i++) {
                    out[i] = Float.float16ToFloat(data.getAtIndex(LE_SHORT, i));
                }
            }
            case BF16 -> {
                for (int i = 0; i < n; i++) {
                    out[i] = fromBf16Bits(data.getAtIndex(LE_SHORT, i));
                }
            }
            default -> throw wrongType("float[]");
        }
        return out;
    }

    public double[] toDoubleArray() {
        requireType(DataType.FP64, "double[]");
        double[] out = new double[Math.toIntExact(elementCount)];
        MemorySegment.copy(data, LE_DOUBLE, 0, out, 0, out.length);
        return out;
    }

    /** INT32 or UINT32 values (UINT32 as raw bits). */
    public int[] toIntArray() {
        requireHost();
        if (dataType != DataType.INT32 && dataType != DataType.UINT32) {
            throw wrongType("int[]");
        }
        int[] out = new int[Math.toIntExact(elementCount)];
        MemorySegment.copy(data, LE_INT, 0, out, 0, out.length);
        return out;
    }

    /** INT64 or UINT64 values (UINT64 as raw bits). */
    public long[] toLongArray() {
        requireHost();
        if (dataType != DataType.INT64 && dataType != DataType.UINT64) {
            throw wrongType("long[]");
        }
        long[] out = new long[Math.toIntExact(elementCount)];
        MemorySegment.copy(data, LE_LONG, 0, out, 0, out.length);
        return out;
    }

    public boolean[] toBooleanArray() {
        requireType(DataType.BOOL, "boolean[]");
        boolean[] out = new boolean[Math.toIntExact(elementCount)];
        for (int i = 0; i < out.length; i++) {
            out[i] = data.get(ValueLayout.JAVA_BYTE, i) != 0;
        }
        return out;
    }

    /** The elements of a BYTES tensor. */
    public List<byte[]> toBytesList() {
        requireType(DataType.BYTES, "List<byte[]>");
        List<byte[]> out = new ArrayList<>(Math.toIntExact(elementCount));
        long off = 0;
        while (off < data.byteSize()) {
            int len = data.get(LE_INT, off);
            out.add(data.asSlice(off + 4, len).toArray(ValueLayout.JAVA_BYTE));
            off += 4L + len;
        }
        return out;
    }

    /** The elements of a BYTES tensor decoded as UTF-8. */
    public List<String> toStringList() {
        List<String> out = new ArrayList<>();
        for (byte[] b : toBytesList()) {
            out.add(new String(b, StandardCharsets.UTF_8));
        }
        return out;
    }

    /** Whether both tensors have the same name, type, shape, memory and bytes. */
    public boolean contentEquals(Tensor other) {
        return name.equals(other.name) && dataType == other.dataType && Arrays.equals(shape, other.shape)
                && memoryType == other.memoryType && deviceId == other.deviceId
                && (memoryType == MemoryType.GPU ? data.address() == other.data.address() && data.byteSize() == other.data.byteSize()
                        : data.mismatch(other.data) == -1);
    }

    @Override
    public String toString() {
        return "Tensor[" + name + ", " + dataType + ", " + Arrays.toString(shape) + ", " + memoryType
                + (memoryType == MemoryType.GPU ? ":" + deviceId : "") + ", " + data.byteSize() + " bytes]";
    }

    /**
     * The element count of {@code shape}, checking that every dimension is ≥ 0 and that the
     * count fits in a {@code long}.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the tensor and the bad dimension, or the
     *     shape whose element count exceeds 2^63-1
     */
    public static long elementCount(String tensorName, long[] shape) {
        for (long d : shape) {
            if (d < 0) {
                throw BackplaneException.invalid("tensor '" + tensorName + "': shape " + Arrays.toString(shape)
                        + " has a negative dimension; concrete tensors need every dimension ≥ 0");
            }
        }
        long n = 1;
        for (long d : shape) {
            try {
                n = Math.multiplyExact(n, d);
            } catch (ArithmeticException overflow) {
                // A zero dimension later in the shape would make it empty: [2^40, 2^40, 0] has no elements.
                if (Arrays.stream(shape).anyMatch(x -> x == 0)) {
                    return 0;
                }
                throw BackplaneException.invalid("tensor '" + tensorName + "': shape " + Arrays.toString(shape) + " causes total element count"
                        + " to exceed maximum size of " + Long.MAX_VALUE + " (more than 2^63-1 elements, which no tensor can hold): check the"
                        + " shape (each dimension is a count of elements, not bytes)");
            }
        }
        return n;
    }

    /**
     * Counts the elements of a serialized BYTES buffer, checking every length prefix against the
     * buffer's bounds.
     *
     * @throws BackplaneException INVALID_ARGUMENT when a length runs past the end
     */
    public static long countBytesElements(String tensorName, MemorySegment data) {
        long off = 0;
        long n = 0;
        long size = data.byteSize();
        while (off < size) {
            if (size - off < 4) {
                throw BackplaneException.invalid("tensor '" + tensorName + "': BYTES data is truncated at byte " + off
                        + " (a 4-byte length prefix was expected)");
            }
            long len = Integer.toUnsignedLong(data.get(LE_INT, off));
            if (len > size - off - 4) {
                throw BackplaneException.invalid("tensor '" + tensorName + "': BYTES element " + n + " claims " + len
                        + " bytes but only " + (size - off - 4) + " remain");
            }
            off += 4 + len;
            n++;
        }
        return n;
    }

    private void requireHost() {
        if (memoryType == MemoryType.GPU) {
            throw new IllegalStateException("tensor '" + name + "' is in GPU memory on device " + deviceId
                    + "; copy it to host memory first");
        }
    }

    private void requireType(DataType expected, String what) {
        requireHost();
        if (dataType != expected) {
            throw wrongType(what);
        }
    }

    private IllegalStateException wrongType(String what) {
        return new IllegalStateException("tensor '" + name + "' is " + dataType + " and cannot be read as " + what);
    }
}
