package io.backplane.core.internal;

import io.backplane.core.repository.FileRoot;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ConfigNode;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Triton's classification extension: an output requested with a class count is answered as a
 * BYTES tensor of {@code "<value>:<index>[:<label>]"} strings, the top classes of each batch item,
 * highest value first (ties by lower index, NaN last), the label taken from the output's
 * {@code label_filename} (one label per line, read once at load from the model directory).
 * Applied by the core to the response a client receives, so every frontend answers the same.
 */
final class Classification {
    static final Classification NONE = new Classification(Map.of());

    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Labels per output name; an output without {@code label_filename} has none. */
    private final Map<String, List<String>> labels;

    private Classification(Map<String, List<String>> labels) {
        this.labels = Map.copyOf(labels);
    }

    /**
     * Reads the label file of every output that names one ({@code label_filename}, relative to the
     * model directory, as in Triton).
     *
     * @throws BackplaneException INVALID_ARGUMENT when a label file is missing, unreadable, named
     *     outside the model directory, or really (links followed) outside {@code files}' root
     */
    static Classification load(ModelConfig config, Path modelDirectory, FileRoot files) {
        Map<String, List<String>> labels = new HashMap<>();
        for (ConfigNode out : config.raw().sections("output")) {
            String file = out.value("label_filename").orElse("");
            if (file.isEmpty()) {
                continue;
            }
            String output = out.value("name").orElse("");
            Path path = ModelFiles.inside(modelDirectory, file, "model '" + config.name() + "' output '" + output + "' label_filename", files);
            try {
                List<String> lines = new ArrayList<>(Files.readAllLines(path, StandardCharsets.UTF_8));
                while (!lines.isEmpty() && lines.getLast().isEmpty()) {
                    lines.removeLast();
                }
                labels.put(output, List.copyOf(lines));
            } catch (IOException e) {
                throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "model '" + config.name() + "' output '" + output
                        + "': cannot read label_filename " + path + ": " + e + "; put the labels file, one label per line, in " + modelDirectory, e);
            }
        }
        return labels.isEmpty() ? NONE : new Classification(labels);
    }

    /** Labels of {@code output}, for tests. */
    List<String> labels(String output) {
        return labels.getOrDefault(output, List.of());
    }

    /**
     * Checks a request's classifications against the config: a declared, numeric output.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the output and what to do
     */
    static void validate(ModelConfig config, InferenceRequest request) {
        for (Map.Entry<String, Integer> c : request.classifications().entrySet()) {
            TensorConfig decl = config.output(c.getKey());
            if (decl == null) {
                if (config.outputs().isEmpty()) {
                    continue;
                }
                throw BackplaneException.invalid("model '" + config.name() + "' has no output '" + c.getKey() + "' to classify; its outputs are "
                        + config.outputs().stream().map(TensorConfig::name).toList());
            }
            if (!numeric(decl.dataType())) {
                throw BackplaneException.invalid("model '" + config.name() + "' output '" + c.getKey() + "' is " + decl.dataType()
                        + ": classification needs a numeric output; request it without the classification parameter");
            }
        }
    }

    private static boolean numeric(DataType t) {
        return t != DataType.BYTES && t != DataType.BOOL;
    }

    /**
     * The response with each classified output replaced by its top classes; the response itself
     * when the request asks for none.
     *
     * @throws BackplaneException INVALID_ARGUMENT when an output cannot be classified (not numeric,
     *     not in host memory)
     */
    InferenceResponse apply(InferenceRequest request, InferenceResponse response, boolean batches) {
        Map<String, Integer> wanted = request.classifications();
        if (wanted.isEmpty() || response.isError()) {
            return response;
        }
        List<Tensor> outputs = new ArrayList<>(response.outputs().size());
        for (Tensor t : response.outputs()) {
            Integer count = wanted.get(t.name());
            outputs.add(count == null ? t : classify(t, count, batches));
        }
        return InferenceResponse.of(outputs, response.parameters());
    }

    private Tensor classify(Tensor t, int count, boolean batches) {
        if (!numeric(t.dataType())) {
            throw BackplaneException.invalid("output '" + t.name() + "' is " + t.dataType()
                    + ": classification needs a numeric output; request it without the classification parameter");
        }
        if (t.memoryType() == MemoryType.GPU) {
            t = t.copyToHeap();
        }
        long[] shape = t.shape();
        long batch = batches && shape.length > 0 ? shape[0] : 1;
        long total = t.elementCount();
        int perItem = batch == 0 ? 0 : Math.toIntExact(total / batch);
        int k = Math.min(count, perItem);
        List<String> names = labels.getOrDefault(t.name(), List.of());
        MemorySegment data = t.data();
        List<String> out = new ArrayList<>();
        for (long b = 0; b < batch; b++) {
            long base = b * perItem;
            Integer[] order = new Integer[perItem];
            double[] values = new double[perItem];
            for (int i = 0; i < perItem; i++) {
                order[i] = i;
                values[i] = value(t.dataType(), data, base + i);
            }
            // Highest first, ties by index; NaN is no score at all, so it ranks last (Double.compare puts it above +inf).
            java.util.Arrays.sort(order, (x, y) -> {
                boolean nx = Double.isNaN(values[x]);
                boolean ny = Double.isNaN(values[y]);
                int c = nx || ny ? Boolean.compare(nx, ny) : Double.compare(values[y], values[x]);
                return c != 0 ? c : Integer.compare(x, y);
            });
            for (int r = 0; r < k; r++) {
                int i = order[r];
                StringBuilder s = new StringBuilder(format(t.dataType(), data, base + i)).append(':').append(i);
                if (i < names.size()) {
                    s.append(':').append(names.get(i));
                }
                out.add(s.toString());
            }
        }
        long[] outShape = batches && shape.length > 0 ? new long[] {batch, k} : new long[] {k};
        return Tensor.ofStrings(t.name(), outShape, out.toArray(String[]::new));
    }

    private static double value(DataType type, MemorySegment d, long i) {
        return switch (type) {
            case UINT8 -> Byte.toUnsignedInt(d.get(ValueLayout.JAVA_BYTE, i));
            case INT8 -> d.get(ValueLayout.JAVA_BYTE, i);
            case UINT16 -> Short.toUnsignedInt(d.get(SHORT, i * 2));
            case INT16 -> d.get(SHORT, i * 2);
            case UINT32 -> Integer.toUnsignedLong(d.get(INT, i * 4));
            case INT32 -> d.get(INT, i * 4);
            case UINT64 -> unsigned(d.get(LONG, i * 8));
            case INT64 -> d.get(LONG, i * 8);
            case FP16 -> Float.float16ToFloat(d.get(SHORT, i * 2));
            case BF16 -> Tensor.fromBf16Bits(d.get(SHORT, i * 2));
            case FP32 -> d.get(FLOAT, i * 4);
            case FP64 -> d.get(DOUBLE, i * 8);
            case BOOL, BYTES -> throw new IllegalArgumentException(type + " is not numeric");
        };
    }

    private static double unsigned(long v) {
        return v >= 0 ? v : (double) (v >>> 1) * 2.0 + (v & 1);
    }

    /** As Triton writes the value (C++ {@code std::to_string}): integers in full, floats with six decimals. */
    private static String format(DataType type, MemorySegment d, long i) {
        return switch (type) {
            case UINT64 -> Long.toUnsignedString(d.get(LONG, i * 8));
            case INT64 -> Long.toString(d.get(LONG, i * 8));
            case FP16, BF16, FP32, FP64 -> String.format(Locale.ROOT, "%f", value(type, d, i));
            default -> Long.toString((long) value(type, d, i));
        };
    }
}
