package io.backplane.core.internal;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Checks a request against its model's config before it is queued, so a backend only ever sees
 * declared inputs with the declared datatype and a compatible shape.
 */
final class RequestValidator {
    private RequestValidator() {
    }

    /**
     * @return the request's size along the batch dimension (1 for models that do not batch)
     * @throws BackplaneException INVALID_ARGUMENT naming the model, the tensor and the bad value
     */
    static int validate(ModelConfig config, InferenceRequest request) {
        String model = config.name();
        int batch = -1;
        Set<String> requested = new HashSet<>();
        for (String o : request.requestedOutputs()) {
            if (!requested.add(o)) {
                throw BackplaneException.invalid("model '" + model + "': output '" + o + "' already exists in request;"
                        + " request each output once");
            }
        }
        for (Tensor t : request.inputs()) {
            TensorConfig decl = config.input(t.name());
            if (decl == null) {
                if (config.inputs().isEmpty()) {
                    continue; // the model declares no inputs: the backend checks them
                }
                throw BackplaneException.invalid("model '" + model + "' has no input '" + t.name() + "'; its inputs are "
                        + config.inputs().stream().map(TensorConfig::name).toList());
            }
            if (decl.dataType() != t.dataType()) {
                throw BackplaneException.invalid("model '" + model + "' input '" + t.name() + "' is " + decl.dataType() + " but the request sent "
                        + t.dataType());
            }
            long[] shape = t.shape();
            List<Long> dims = decl.dims();
            int offset = 0;
            if (config.batches()) {
                if (shape.length == 0) {
                    throw BackplaneException.invalid("model '" + model + "' input '" + t.name()
                            + "' needs a batch dimension first (max_batch_size " + config.maxBatchSize() + "), but the request sent a scalar");
                }
                long b = shape[0];
                if (b < 1) {
                    throw BackplaneException.invalid("model '" + model + "' input '" + t.name() + "' has batch size " + b + "; it must be ≥ 1");
                }
                if (b > config.maxBatchSize()) {
                    throw BackplaneException.invalid("model '" + model + "' input '" + t.name() + "' has batch size " + b
                            + ", over the model's max_batch_size " + config.maxBatchSize() + "; split the request");
                }
                if (batch >= 0 && b != batch) {
                    throw BackplaneException.invalid("model '" + model + "' inputs disagree on the batch size: " + batch + " and " + b + " (input '"
                            + t.name() + "')");
                }
                batch = (int) b;
                offset = 1;
            }
            if (!dims.isEmpty() && !matches(shape, offset, dims)) {
                throw BackplaneException.invalid("model '" + model + "' input '" + t.name() + "' has shape " + Arrays.toString(shape)
                        + " but the config expects " + (config.batches() ? "[-1] + " : "") + dims + " (-1 = any size)");
            }
        }
        for (TensorConfig decl : config.inputs()) {
            if (!decl.optional() && request.input(decl.name()) == null) {
                throw BackplaneException.invalid("model '" + model + "' needs input '" + decl.name() + "' (" + decl.dataType() + " " + decl.dims()
                        + "), which the request does not have");
            }
        }
        if (!config.outputs().isEmpty()) {
            for (String out : request.requestedOutputs()) {
                if (config.output(out) == null) {
                    throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "model '" + model + "' has no output '" + out + "'; its outputs are "
                            + config.outputs().stream().map(TensorConfig::name).toList());
                }
            }
        }
        return batch < 0 ? 1 : batch;
    }

    private static boolean matches(long[] shape, int offset, List<Long> dims) {
        if (shape.length - offset != dims.size()) {
            return false;
        }
        for (int i = 0; i < dims.size(); i++) {
            long d = dims.get(i);
            if (d != -1 && d != shape[i + offset]) {
                return false;
            }
        }
        return true;
    }
}
