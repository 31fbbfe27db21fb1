package ${package};

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.util.List;
import java.util.Map;

/**
 * One instance. The host never calls {@link #execute} concurrently on one instance. For each
 * request of the batch it sends exactly one FINAL: the result, or an error for that request only.
 */
final class ScaleInstance implements ModelInstance {
    private final float factor;

    ScaleInstance(float factor) {
        this.factor = factor;
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        for (ScheduledRequest r : batch) {
            try {
                r.sender().sendFinal(answer(r));
            } catch (BackplaneException e) {
                r.sender().sendError(e); // this request only; the others of the batch go on
            }
        }
    }

    private InferenceResponse answer(ScheduledRequest r) {
        if (r.isCancelled()) {
            throw new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " was cancelled before it ran");
        }
        if (Boolean.TRUE.equals(r.request().parameters().get("fail"))) {
            throw BackplaneException.invalid("request " + r.id() + " asked to fail (parameter fail=true)");
        }
        Tensor in = r.request().input("INPUT0");
        if (in == null) {
            throw BackplaneException.invalid("this model needs an FP32 input named INPUT0");
        }
        float[] values = in.toFloatArray();
        for (int i = 0; i < values.length; i++) {
            values[i] *= factor;
        }
        return InferenceResponse.of(List.of(Tensor.ofFloats("OUTPUT0", in.shape(), values)), Map.of());
    }

    @Override
    public void close() {
        // nothing to release
    }
}
