package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.Tensor;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Tensor data in the Open Inference Protocol's JSON form: a flat or nested array of numbers
 * (booleans for BOOL, strings for BYTES) in row-major order. FP16 and BF16 travel as JSON
 * numbers and are rounded to the nearest representable value.
 */
final class TensorJson {
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private TensorJson() {
    }

    /** Flattens {@code data} (a scalar, or arrays nested to any depth) into its leaves. */
    static List<JsonNode> flatten(JsonNode data) {
        List<JsonNode> out = new ArrayList<>();
        flatten(data, out);
        return out;
    }

    private static void flatten(JsonNode n, List<JsonNode> out) {
        if (n.isArray()) {
            for (JsonNode c : n) {
                flatten(c, out);
            }
        } else {
            out.add(n);
        }
    }

    /** Encodes JSON leaves as a tensor of {@code type} and {@code shape}. */
    static Tensor toTensor(String name, DataType type, long[] shape, List<JsonNode> values) {
        long expected = Tensor.elementCount(name, shape);
        if (expected != values.size()) {
            throw BackplaneException.invalid("input '" + name + "': shape " + java.util.Arrays.toString(shape) + " needs " + expected
                    + " elements but the data has " + values.size());
        }
        int n = values.size();
        if (type == DataType.BYTES) {
            List<byte[]> els = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                JsonNode v = values.get(i);
                if (!v.isTextual()) {
                    throw bad(name, type, i, v, "a string");
                }
                els.add(v.textValue().getBytes(StandardCharsets.UTF_8));
            }
            return Tensor.ofBytes(name, shape, els);
        }
        MemorySegment s = MemorySegment.ofArray(new byte[Math.multiplyExact(n, type.byteSize())]);
        for (int i = 0; i < n; i++) {
            JsonNode v = values.get(i);
            switch (type) {
                case BOOL -> {
                    boolean b;
                    if (v.isBoolean()) {
                        b = v.booleanValue();
                    } else if (v.isIntegralNumber() && (v.longValue() == 0 || v.longValue() == 1)) {
                        b = v.longValue() == 1;
                    } else {
                        throw bad(name, type, i, v, "true or false");
                    }
                    s.set(ValueLayout.JAVA_BYTE, i, (byte) (b ? 1 : 0));
                }
                case INT8 -> s.set(ValueLayout.JAVA_BYTE, i, (byte) integral(name, type, i, v, Byte.MIN_VALUE, Byte.MAX_VALUE));
                case UINT8 -> s.set(ValueLayout.JAVA_BYTE, i, (byte) integral(name, type, i, v, 0, 255));
                case INT16 -> s.setAtIndex(SHORT, i, (short) integral(name, type, i, v, Short.MIN_VALUE, Short.MAX_VALUE));
                case UINT16 -> s.setAtIndex(SHORT, i, (short) integral(name, type, i, v, 0, 65535));
                case INT32 -> s.setAtIndex(INT, i, (int) integral(name, type, i, v, Integer.MIN_VALUE, Integer.MAX_VALUE));
                case UINT32 -> s.setAtIndex(INT, i, (int) integral(name, type, i, v, 0, 0xFFFF_FFFFL));
                case INT64 -> s.setAtIndex(LONG, i, integral(name, type, i, v, Long.MIN_VALUE, Long.MAX_VALUE));
                case UINT64 -> {
                    if (!v.isIntegralNumber() || v.bigIntegerValue().signum() < 0 || v.bigIntegerValue().bitLength() > 64) {
                        throw bad(name, type, i, v, "an integer in [0, 2^64)");
                    }
                    s.setAtIndex(LONG, i, v.bigIntegerValue().longValue());
                }
                case FP16 -> s.setAtIndex(SHORT, i, Float.floatToFloat16((float) real(name, type, i, v)));
                case BF16 -> s.setAtIndex(SHORT, i, Tensor.toBf16Bits((float) real(name, type, i, v)));
                case FP32 -> s.setAtIndex(FLOAT, i, (float) real(name, type, i, v));
                case FP64 -> s.setAtIndex(DOUBLE, i, real(name, type, i, v));
                case BYTES -> throw new AssertionError("handled above");
            }
        }
        return Tensor.of(name, type, shape, s);
    }

    private static long integral(String name, DataType type, int i, JsonNode v, long min, long max) {
        if (!v.isIntegralNumber() || !v.canConvertToLong()) {
            throw bad(name, type, i, v, "an integer in [" + min + ", " + max + "]");
        }
        long x = v.longValue();
        if (x < min || x > max) {
            throw bad(name, type, i, v, "an integer in [" + min + ", " + max + "]");
        }
        return x;
    }

    private static double real(String name, DataType type, int i, JsonNode v) {
        if (v.isNumber()) {
            return v.doubleValue();
        }
        if (v.isTextual()) {
            switch (v.textValue()) {
                case "NaN", "nan" -> {
                    return Double.NaN;
                }
                case "Infinity", "inf" -> {
                    return Double.POSITIVE_INFINITY;
                }
                case "-Infinity", "-inf" -> {
                    return Double.NEGATIVE_INFINITY;
                }
                default -> {
                }
            }
        }
        throw bad(name, type, i, v, "a number");
    }

    private static BackplaneException bad(String name, DataType type, int i, JsonNode v, String wanted) {
        String shown = v.toString();
        if (shown.length() > 40) {
            shown = shown.substring(0, 40) + "...";
        }
        return BackplaneException.invalid("input '" + name + "' (" + type + "): element " + i + " is " + shown + ", expected " + wanted);
    }

    /** Writes a host tensor's elements as a flat JSON array. */
    static void writeData(JsonGenerator g, Tensor t) throws IOException {
        MemorySegment s = t.data();
        int n = Math.toIntExact(t.elementCount());
        g.writeStartArray();
        switch (t.dataType()) {
            case BOOL -> {
                for (int i = 0; i < n; i++) {
                    g.writeBoolean(s.get(ValueLayout.JAVA_BYTE, i) != 0);
                }
            }
            case INT8 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(s.get(ValueLayout.JAVA_BYTE, i));
                }
            }
            case UINT8 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(s.get(ValueLayout.JAVA_BYTE, i) & 0xFF);
                }
            }
            case INT16 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(s.getAtIndex(SHORT, i));
                }
            }
            case UINT16 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(s.getAtIndex(SHORT, i) & 0xFFFF);
                }
            }
            case INT32 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(s.getAtIndex(INT, i));
                }
            }
            case UINT32 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(Integer.toUnsignedLong(s.getAtIndex(INT, i)));
                }
            }
            case INT64 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(s.getAtIndex(LONG, i));
                }
            }
            case UINT64 -> {
                for (int i = 0; i < n; i++) {
                    g.writeNumber(Long.toUnsignedString(s.getAtIndex(LONG, i)));
                }
            }
            case FP16 -> {
                for (int i = 0; i < n; i++) {
                    writeFloat(g, Float.float16ToFloat(s.getAtIndex(SHORT, i)));
                }
            }
            case BF16 -> {
                for (int i = 0; i < n; i++) {
                    writeFloat(g, Tensor.fromBf16Bits(s.getAtIndex(SHORT, i)));
                }
            }
            case FP32 -> {
                for (int i = 0; i < n; i++) {
                    writeFloat(g, s.getAtIndex(FLOAT, i));
                }
            }
            case FP64 -> {
                for (int i = 0; i < n; i++) {
                    double d = s.getAtIndex(DOUBLE, i);
                    if (Double.isFinite(d)) {
                        g.writeNumber(d);
                    } else {
                        g.writeString(Double.isNaN(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
                    }
                }
            }
            case BYTES -> {
                for (String e : t.toStringList()) {
                    g.writeString(e);
                }
            }
        }
        g.writeEndArray();
    }

    private static void writeFloat(JsonGenerator g, float f) throws IOException {
        if (Float.isFinite(f)) {
            g.writeNumber(f);
        } else {
            g.writeString(Float.isNaN(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
        }
    }

    /** Writes a single-element tensor as a bare JSON value, or a flat array otherwise (generate extension). */
    static void writeValue(JsonGenerator g, Tensor t) throws IOException {
        if (t.elementCount() != 1) {
            writeData(g, t);
            return;
        }
        if (t.dataType() == DataType.BYTES) {
            g.writeString(t.toStringList().get(0));
            return;
        }
        // Write the one-element array and unwrap it: reuse writeData's per-type logic.
        java.io.StringWriter w = new java.io.StringWriter();
        try (JsonGenerator sub = Json.FACTORY.createGenerator(w)) {
            writeData(sub, t);
        }
        String arr = w.toString();
        g.writeRawValue(arr.substring(1, arr.length() - 1));
    }
}
