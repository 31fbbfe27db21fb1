package io.backplane.backend.cpu;

import ai.onnxruntime.NodeInfo;
import ai.onnxruntime.TensorInfo;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Checks a model's {@code config.pbtxt} against the ONNX file's own inputs and outputs, and fills
 * inputs and outputs the config omits (Triton's auto-complete).
 *
 * <p>Rules: every config tensor exists in the model with the same datatype; every model input is
 * in the config; ranks agree (the config's dims plus the batch dimension when
 * {@code max_batch_size > 0}); a fixed model dimension must be given as the same number in the
 * config, a dynamic one ({@code -1} or a symbolic name in the file) accepts any config value;
 * with batching the model's first dimension must be dynamic. {@code reshape} is not supported.
 */
final class Signatures {
    private Signatures() {
    }

    /** Fills empty {@code input}/{@code output} lists from the model; leaves declared ones as they are. */
    static ModelConfig complete(ModelConfig config, Map<String, NodeInfo> modelInputs, Map<String, NodeInfo> modelOutputs, String where) {
        if (!config.inputs().isEmpty() && !config.outputs().isEmpty()) {
            return config;
        }
        ModelConfig.Builder b = config.toBuilder();
        if (config.inputs().isEmpty()) {
            b.clearInputs();
            for (NodeInfo n : modelInputs.values()) {
                b.input(fromModel(config, n, where));
            }
        }
        if (config.outputs().isEmpty()) {
            b.clearOutputs();
            for (NodeInfo n : modelOutputs.values()) {
                b.output(fromModel(config, n, where));
            }
        }
        return b.build();
    }

    /**
     * Checks {@code config} against the model.
     *
     * @throws BackplaneException INVALID_ARGUMENT (or UNSUPPORTED) saying which tensor disagrees and how
     */
    static void check(ModelConfig config, Map<String, NodeInfo> modelInputs, Map<String, NodeInfo> modelOutputs, String where) {
        for (TensorConfig t : config.inputs()) {
            checkTensor(config, "input", t, modelInputs, where);
        }
        for (TensorConfig t : config.outputs()) {
            checkTensor(config, "output", t, modelOutputs, where);
        }
        for (String name : modelInputs.keySet()) {
            if (config.input(name) == null) {
                throw BackplaneException.invalid(where + ": the model has input '" + name + "' but config.pbtxt does not declare it;"
                        + " declare it (" + describe(modelInputs.get(name)) + "), or omit every input to let the backend fill them");
            }
        }
        if (config.outputs().isEmpty()) {
            throw BackplaneException.invalid(where + ": config.pbtxt declares no output and the model has none");
        }
    }

    private static void checkTensor(ModelConfig config, String kind, TensorConfig t, Map<String, NodeInfo> model, String where) {
        NodeInfo node = model.get(t.name());
        if (node == null) {
            throw BackplaneException.invalid(where + ": config.pbtxt declares " + kind + " '" + t.name() + "' but the model's " + kind
                    + "s are " + describeAll(model));
        }
        TensorInfo info = tensorInfo(node, where);
        DataType modelType = OrtTypes.dataType(info.onnxType);
        if (modelType == null) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": model " + kind + " '" + t.name() + "' has element type "
                    + OrtTypes.onnxName(info.onnxType) + ", which the Open Inference Protocol cannot carry");
        }
        if (modelType != t.dataType()) {
            throw BackplaneException.invalid(where + ": " + kind + " '" + t.name() + "' is " + t.dataType().configName()
                    + " in config.pbtxt but " + modelType.configName() + " (" + OrtTypes.onnxName(info.onnxType) + ") in the model");
        }
        if (kind.equals("input") && !OrtTypes.canCreate(modelType)) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": input '" + t.name() + "' is " + modelType
                    + ", which this ONNX Runtime's Java API cannot create");
        }
        long[] modelShape = info.getShape();
        List<Long> expected = new ArrayList<>();
        if (config.batches()) {
            expected.add(-1L);
        }
        // With reshape the core hands the backend tensors of the reshape shape; the model must have that one.
        List<Long> own = t.reshape() != null ? t.reshape() : t.dims();
        expected.addAll(own);
        String shapes = "config.pbtxt gives " + (config.batches() ? "[batch] + " : "") + own + (t.reshape() != null ? " (reshape)" : "")
                + ", the model " + Arrays.toString(modelShape)
                + " (-1 = dynamic)";
        if (modelShape.length != expected.size()) {
            throw BackplaneException.invalid(where + ": " + kind + " '" + t.name() + "' has rank " + modelShape.length + " in the model but "
                    + expected.size() + " in config.pbtxt: " + shapes
                    + (config.batches() ? "; with max_batch_size > 0 the dims exclude the batch dimension" : ""));
        }
        for (int i = 0; i < modelShape.length; i++) {
            boolean batchDim = config.batches() && i == 0;
            if (batchDim) {
                if (modelShape[0] != -1) {
                    throw BackplaneException.invalid(where + ": " + kind + " '" + t.name() + "' has a fixed first dimension "
                            + modelShape[0] + " in the model, so it cannot batch; set max_batch_size: 0 (dims " + Arrays.toString(modelShape)
                            + ") or export the model with a dynamic batch axis");
                }
            } else if (modelShape[i] != -1 && expected.get(i) != modelShape[i]) {
                throw BackplaneException.invalid(where + ": " + kind + " '" + t.name() + "' dimension " + i + " is " + modelShape[i]
                        + " in the model but " + expected.get(i) + " in config.pbtxt: " + shapes);
            }
        }
    }

    private static TensorConfig fromModel(ModelConfig config, NodeInfo node, String where) {
        TensorInfo info = tensorInfo(node, where);
        DataType type = OrtTypes.dataType(info.onnxType);
        if (type == null) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": model tensor '" + node.getName() + "' has element type "
                    + OrtTypes.onnxName(info.onnxType) + ", which the Open Inference Protocol cannot carry");
        }
        long[] shape = info.getShape();
        if (config.batches()) {
            if (shape.length == 0 || shape[0] != -1) {
                throw BackplaneException.invalid(where + ": max_batch_size is " + config.maxBatchSize() + " but model tensor '" + node.getName()
                        + "' has shape " + Arrays.toString(shape) + " without a dynamic first (batch) dimension; set max_batch_size: 0");
            }
            shape = Arrays.copyOfRange(shape, 1, shape.length);
        }
        return TensorConfig.of(node.getName(), type, shape);
    }

    private static TensorInfo tensorInfo(NodeInfo node, String where) {
        if (node.getInfo() instanceof TensorInfo ti) {
            return ti;
        }
        throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": model tensor '" + node.getName() + "' is " + node.getInfo()
                + "; the cpu backend serves dense tensors only (no maps, sequences or sparse tensors)");
    }

    static String describe(NodeInfo n) {
        if (n.getInfo() instanceof TensorInfo ti) {
            DataType t = OrtTypes.dataType(ti.onnxType);
            return (t == null ? OrtTypes.onnxName(ti.onnxType) : t.configName()) + " " + Arrays.toString(ti.getShape());
        }
        return String.valueOf(n.getInfo());
    }

    private static String describeAll(Map<String, NodeInfo> nodes) {
        List<String> out = new ArrayList<>();
        nodes.forEach((k, v) -> out.add("'" + k + "' " + describe(v)));
        return out.toString();
    }
}
