package io.backplane.plugin.http;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Test backend "testing": identity models (output i is input i renamed to the config's output
 * i), a decoupled "repeat" model (input IN = n: n responses OUT = 0..n-1, then a bare FINAL), a
 * "slow" identity model that sleeps {@link #delayMillis}, and a "fail" model that throws.
 * {@link #ready} false makes every instance report not ready.
 */
public final class TestBackend implements BackendFactory {
    public static final String NAME = "testing";
    public volatile boolean ready = true;
    public volatile long delayMillis = 200;
    public final AtomicInteger executed = new AtomicInteger();
    /** Backend models created (loadModel calls that returned). */
    public final AtomicInteger modelsLoaded = new AtomicInteger();

    @Override
    public String name() {
        return NAME;
    }

    /** A version folder holding {@code model.testing} is this backend's (a config naming no backend takes it). */
    @Override
    public io.backplane.spi.BackendCapabilities capabilities() {
        return io.backplane.spi.BackendCapabilities.builder().modelFileNames("model.testing").build();
    }

    /** An identity model with one input/output pair per datatype given: IN_i / OUT_i, dims [-1]. */
    public static ModelConfig identity(String name, DataType... types) {
        ModelConfig.Builder b = ModelConfig.builder(name).backend(NAME);
        for (int i = 0; i < types.length; i++) {
            b.input(TensorConfig.of("IN" + i, types[i], -1)).output(TensorConfig.of("OUT" + i, types[i], -1));
        }
        return b.build();
    }

    /** Every datatype: inputs IN_<TYPE>, outputs OUT_<TYPE>, dims [-1]. */
    public static ModelConfig allTypes(String name) {
        ModelConfig.Builder b = ModelConfig.builder(name).backend(NAME);
        for (DataType t : DataType.values()) {
            b.input(TensorConfig.builder("IN_" + t, t).dims(-1).optional(true).build()).output(TensorConfig.of("OUT_" + t, t, -1));
        }
        return b.build();
    }

    /** Generate-style model: BYTES text_input [1] to text_output [1]. */
    public static ModelConfig text(String name, boolean decoupled) {
        return ModelConfig.builder(name).backend(NAME).decoupled(decoupled).input(TensorConfig.of("text_input", DataType.BYTES, 1))
                .output(TensorConfig.of("text_output", DataType.BYTES, 1)).build();
    }

    public static ModelConfig repeat(String name) {
        return ModelConfig.builder(name).backend(NAME).decoupled(true).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).parameter("mode", "repeat").build();
    }

    public static ModelConfig slow(String name) {
        return ModelConfig.builder(name).backend(NAME).input(TensorConfig.of("IN0", DataType.FP32, -1))
                .output(TensorConfig.of("OUT0", DataType.FP32, -1)).parameter("mode", "slow").build();
    }

    public static ModelConfig failing(String name) {
        return ModelConfig.builder(name).backend(NAME).input(TensorConfig.of("IN0", DataType.FP32, -1))
                .output(TensorConfig.of("OUT0", DataType.FP32, -1)).parameter("mode", "fail").build();
    }

    /** A model that fails every batch with the {@code ErrorCode} named by its first request's parameter {@code code}. */
    public static ModelConfig erroring(String name) {
        return ModelConfig.builder(name).backend(NAME).input(TensorConfig.of("IN0", DataType.FP32, -1))
                .output(TensorConfig.of("OUT0", DataType.FP32, -1)).parameter("mode", "error").build();
    }

    /** A model whose instance reports itself failed on every batch (the core restarts it). */
    public static ModelConfig crashing(String name) {
        return ModelConfig.builder(name).backend(NAME).input(TensorConfig.of("IN0", DataType.FP32, -1))
                .output(TensorConfig.of("OUT0", DataType.FP32, -1)).parameter("mode", "crash").build();
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                ModelConfig config = ctx.config();
                String mode = config.parameters().getOrDefault("mode", "identity");
                modelsLoaded.incrementAndGet();
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) {
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) throws Exception {
                                executed.incrementAndGet();
                                switch (mode) {
                                    case "fail" -> throw new IllegalStateException("the test model failed on purpose");
                                    case "error" -> {
                                        Object code = batch.get(0).request().parameters().get("code");
                                        throw new io.backplane.spi.BackplaneException(io.backplane.spi.ErrorCode.valueOf(String.valueOf(code)),
                                                "the test model failed with " + code + " on purpose");
                                    }
                                    case "crash" -> {
                                        ictx.reportFailure(new IllegalStateException("the test instance crashed on purpose"));
                                        return;
                                    }
                                    case "slow" -> Thread.sleep(delayMillis);
                                    case "repeat" -> {
                                        for (ScheduledRequest r : batch) {
                                            long n = r.request().input("IN").toLongArray()[0];
                                            for (long i = 0; i < n; i++) {
                                                r.sender().send(InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1}, i))), 0);
                                            }
                                            r.sender().send(null, ResponseSender.FINAL);
                                        }
                                        return;
                                    }
                                    default -> {
                                    }
                                }
                                for (ScheduledRequest r : batch) {
                                    List<Tensor> in = r.request().inputs();
                                    List<Tensor> out = new ArrayList<>(in.size());
                                    for (Tensor t : in) {
                                        int i = indexOf(config.inputs(), t.name());
                                        out.add(t.withName(config.outputs().get(i).name()));
                                    }
                                    r.sender().sendFinal(InferenceResponse.of(out));
                                }
                            }

                            @Override
                            public boolean isReady() {
                                return ready;
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

            @Override
            public void close() {
            }
        };
    }

    private static int indexOf(List<TensorConfig> ts, String name) {
        for (int i = 0; i < ts.size(); i++) {
            if (ts.get(i).name().equals(name)) {
                return i;
            }
        }
        throw new IllegalArgumentException("no input " + name);
    }
}
