package io.backplane.core.internal;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Applies {@code reshape} as {@link TensorConfig} documents it: a backend sees inputs and
 * produces outputs shaped as {@code reshape}, a client sends and receives them shaped as
 * {@code dims} (each with the batch dimension first when the model batches). Only the shape
 * changes, never the bytes.
 */
final class Reshape {
    private Reshape() {
    }

    /** {@code request} with every input that has a reshape in its backend shape; the same object when none has. */
    static InferenceRequest toBackend(ModelConfig config, InferenceRequest request) {
        if (config.inputs().stream().allMatch(t -> t.reshape() == null)) {
            return request;
        }
        List<Tensor> inputs = new ArrayList<>(request.inputs().size());
        boolean changed = false;
        for (Tensor t : request.inputs()) {
            TensorConfig decl = config.input(t.name());
            Tensor r = decl == null || decl.reshape() == null ? t : reshaped(t, config.batches(), decl.reshape(), decl.dims());
            changed |= r != t;
            inputs.add(r);
        }
        return changed ? request.toBuilder().clearInputs().inputs(inputs).build() : request;
    }

    /** {@code response} with every output that has a reshape back in its declared shape; the same object when none has. */
    static InferenceResponse toClient(ModelConfig config, InferenceResponse response) {
        if (response.isError() || config.outputs().stream().allMatch(t -> t.reshape() == null)) {
            return response;
        }
        List<Tensor> outputs = new ArrayList<>(response.outputs().size());
        boolean changed = false;
        for (Tensor t : response.outputs()) {
            TensorConfig decl = config.output(t.name());
            Tensor r = decl == null || decl.reshape() == null ? t : reshaped(t, config.batches(), decl.dims(), decl.reshape());
            changed |= r != t;
            outputs.add(r);
        }
        return changed ? InferenceResponse.of(outputs, response.parameters()) : response;
    }

    /**
     * {@code t} shaped as {@code target} (after its batch dimension when {@code batched}); a
     * {@code -1} in the target takes what is left of the element count, or, when the target has
     * several, the matching dimension of {@code source}-shaped data. Returns {@code t} itself when
     * the shapes cannot be matched, and lets the usual checks report the problem.
     */
    private static Tensor reshaped(Tensor t, boolean batched, List<Long> target, List<Long> source) {
        long[] shape = t.shape();
        int lead = batched && shape.length > 0 ? 1 : 0;
        long batch = lead == 1 ? shape[0] : 1;
        long[] resolved = resolve(target, source, shape, lead, batch == 0 ? 0 : t.elementCount() / batch);
        if (resolved == null) {
            return t;
        }
        long[] out = new long[lead + resolved.length];
        if (lead == 1) {
            out[0] = batch;
        }
        System.arraycopy(resolved, 0, out, lead, resolved.length);
        if (java.util.Arrays.equals(out, shape)) {
            return t;
        }
        try {
            return t.withShape(out);
        } catch (RuntimeException e) {
            return t; // element counts disagree: the backend or the validator reports it
        }
    }

    private static long @Nullable [] resolve(List<Long> target, List<Long> source, long[] shape, int lead, long perItem) {
        long[] out = new long[target.size()];
        int variable = -1;
        int variables = 0;
        long known = 1;
        for (int i = 0; i < out.length; i++) {
            out[i] = target.get(i);
            if (out[i] == -1) {
                variable = i;
                variables++;
            } else {
                known *= out[i];
            }
        }
        if (variables == 0) {
            return out;
        }
        if (variables == 1) {
            if (known == 0 || perItem % known != 0) {
                return null;
            }
            out[variable] = perItem / known;
            return out;
        }
        // Several variable dimensions: take them positionally from the data when the ranks agree.
        if (shape.length - lead != out.length || source.size() != out.length) {
            return null;
        }
        for (int i = 0; i < out.length; i++) {
            if (out[i] == -1) {
                out[i] = shape[lead + i];
            }
        }
        return out;
    }
}
