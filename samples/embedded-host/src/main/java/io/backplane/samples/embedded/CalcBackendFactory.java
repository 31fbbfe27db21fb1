package io.backplane.samples.embedded;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.List;

/**
 * A tiny in-process backend for the embedded sample, so that it runs without Python: model
 * {@code add_sub} (Triton's classic example: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1,
 * FP32 [4]) and the decoupled model {@code countdown} (IN = n streams n, n-1, …, 1, then FINAL).
 */
public final class CalcBackendFactory implements BackendFactory {
    public static final String NAME = "calc";

    public static ModelConfig addSub() {
        return ModelConfig.builder("add_sub").backend(NAME).input(TensorConfig.of("INPUT0", DataType.FP32, 4))
                .input(TensorConfig.of("INPUT1", DataType.FP32, 4)).output(TensorConfig.of("OUTPUT0", DataType.FP32, 4))
                .output(TensorConfig.of("OUTPUT1", DataType.FP32, 4)).build();
    }

    public static ModelConfig countdown() {
        return ModelConfig.builder("countdown").backend(NAME).decoupled(true).input(TensorConfig.of("IN", DataType.INT32, 1))
                .output(TensorConfig.of("OUT", DataType.INT32, 1)).build();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                ModelConfig c = ctx.config();
                if (c.maxBatchSize() > 0 || c.instanceGroups().stream().anyMatch(g -> g.kind() == InstanceKind.GPU)) {
                    throw new BackplaneException(ErrorCode.UNSUPPORTED, "backend 'calc' supports neither batching nor GPU instances (model '"
                            + ctx.name() + "')");
                }
                boolean count = c.decoupled();
                if (count != c.name().startsWith("countdown")) {
                    throw new BackplaneException(ErrorCode.UNSUPPORTED, "backend 'calc': only countdown models are decoupled (model '" + ctx.name() + "')");
                }
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) {
                        return new CalcInstance(count);
                    }

                    @Override
                    public void close() {
                    }
                };
            }

            @Override
            public void close() {
            }
        };
    }

    private record CalcInstance(boolean countdown) implements ModelInstance {
        @Override
        public void execute(List<ScheduledRequest> batch) {
            for (ScheduledRequest r : batch) {
                ResponseSender s = r.sender();
                if (r.isCancelled()) {
                    s.sendError(new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " was cancelled"));
                } else if (countdown) {
                    int n = r.request().input("IN").toIntArray()[0];
                    for (int i = n; i >= 1; i--) {
                        s.send(InferenceResponse.of(List.of(Tensor.ofInts("OUT", new long[] {1}, i))), 0);
                    }
                    s.send(null, ResponseSender.FINAL);
                } else {
                    float[] a = r.request().input("INPUT0").toFloatArray();
                    float[] b = r.request().input("INPUT1").toFloatArray();
                    float[] sum = new float[a.length];
                    float[] diff = new float[a.length];
                    for (int i = 0; i < a.length; i++) {
                        sum[i] = a[i] + b[i];
                        diff[i] = a[i] - b[i];
                    }
                    s.sendFinal(InferenceResponse.of(List.of(Tensor.ofFloats("OUTPUT0", new long[] {a.length}, sum),
                            Tensor.ofFloats("OUTPUT1", new long[] {a.length}, diff))));
                }
            }
        }

        @Override
        public void close() {
        }
    }
}
