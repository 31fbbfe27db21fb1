package io.backplane.spi;

import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * Tensor element types: every datatype of the Open Inference Protocol.
 *
 * <p>Fixed-size types are stored little-endian, row-major. {@link #BYTES} elements are stored as
 * Triton serializes them: for each element a 4-byte little-endian length, then that many bytes.
 */
public enum DataType {
    BOOL(1),
    UINT8(1),
    UINT16(2),
    UINT32(4),
    UINT64(8),
    INT8(1),
    INT16(2),
    INT32(4),
    INT64(8),
    FP16(2),
    BF16(2),
    FP32(4),
    FP64(8),
    /** Variable-length byte strings; {@link #byteSize()} is 0. */
    BYTES(0);

    private final int byteSize;

    DataType(int byteSize) {
        this.byteSize = byteSize;
    }

    /** Bytes per element, or 0 for {@link #BYTES}. */
    public int byteSize() {
        return byteSize;
    }

    /** Whether elements have a fixed size (every type but {@link #BYTES}). */
    public boolean isFixedSize() {
        return byteSize > 0;
    }

    /** The Open Inference Protocol name, e.g. {@code "FP32"}. */
    public String protocolName() {
        return name();
    }

    /** The {@code config.pbtxt} name, e.g. {@code "TYPE_FP32"}; BYTES is {@code "TYPE_STRING"}. */
    public String configName() {
        return this == BYTES ? "TYPE_STRING" : "TYPE_" + name();
    }

    /**
     * Parses a protocol name ({@code "FP32"}), case-insensitively.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the value and the accepted names
     */
    public static DataType fromProtocolName(String name) {
        DataType type = lookup(name.toUpperCase(Locale.ROOT));
        if (type == null) {
            throw BackplaneException.invalid("unknown datatype '" + name + "': use one of " + java.util.Arrays.toString(values()));
        }
        return type;
    }

    /**
     * Parses a {@code config.pbtxt} name ({@code "TYPE_FP32"}, {@code "TYPE_STRING"}).
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the value
     */
    public static DataType fromConfigName(String name) {
        if (name.equals("TYPE_STRING")) {
            return BYTES;
        }
        DataType type = name.startsWith("TYPE_") ? lookup(name.substring(5)) : null;
        if (type == null || type == BYTES) {
            throw BackplaneException.invalid("unknown data_type '" + name + "': use TYPE_BOOL, TYPE_UINT8..TYPE_UINT64, TYPE_INT8..TYPE_INT64, TYPE_FP16, TYPE_BF16, TYPE_FP32, TYPE_FP64 or TYPE_STRING");
        }
        return type;
    }

    private static @Nullable DataType lookup(String name) {
        for (DataType t : values()) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        return null;
    }
}
