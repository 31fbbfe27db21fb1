package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.TensorFill;
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
        int n = values.size();
        if (type == DataType.BYTES) {
            TensorFill.requireElements(name, type, shape, n);
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
        TensorFill fill = TensorFill.of(name, type, shape, n);
        for (int i = 0; i < n; i++) {
            JsonNode v = values.get(i);
            switch (type) {
                case BOOL -> {
                    if (v.isBoolean()) {
                        fill.setBoolean(i, v.booleanValue());
                    } else if (v.isIntegralNumber() && v.canConvertToLong()) {
                        fill.setLong(i, v.longValue());
                    } else {
                        throw bad(name, type, i, v, "true or false");
                    }
                }
                case UINT64 -> {
                    if (!v.isIntegralNumber() || v.bigIntegerValue().signum() < 0 || v.bigIntegerValue().bitLength() > 64) {
                        throw bad(name, type, i, v, "an integer in [0, 2^64)");
                    }
                    fill.setUnsignedLong(i, v.bigIntegerValue().longValue());
                }
                case FP16, BF16, FP32, FP64 -> fill.setDouble(i, real(name, type, i, v));
                default -> {
                    if (!v.isIntegralNumber() || !v.canConvertToLong()) {
                        throw bad(name, type, i, v, "an integer");
                    }
                    fill.setLong(i, v.longValue());
                }
            }
        }
        return fill.build();
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
