package io.backplane.testkit;

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
import io.backplane.spi.Spi;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * The identity backend: output {@code i} of the config is input {@code i} of the request,
 * renamed, with its data shared (no copy); a decoupled model sends it {@code responses} times (a
 * model parameter, default 3), then an empty FINAL. It measures the serving path itself in
 * benchmarks and the load tool, and stands in for "a backend that does nothing" in tests. Not
 * registered as a service: add it in code
 * ({@code BackplaneHost.builder().backend(new IdentityBackendFactory())}). Stateless; every object it
 * creates is thread-safe.
 */
public final class IdentityBackendFactory implements BackendFactory {
    /** The backend's name in a model config. */
    public static final String NAME = "identity";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    /** Its models never start child requests, so the core may run their ensemble steps without a hand-off. */
    @Override
    public io.backplane.spi.BackendCapabilities capabilities() {
        return io.backplane.spi.BackendCapabilities.builder().childRequests(false).build();
    }

    /**
     * An identity model {@code name}: {@code IN0 → OUT0}, FP32 with one variable dimension, no
     * batching, {@code instances} CPU instances.
     */
    public static ModelConfig model(String name, int instances) {
        return ModelConfig.builder(name).backend(NAME).input(TensorConfig.of("IN0", DataType.FP32, -1))
                .output(TensorConfig.of("OUT0", DataType.FP32, -1))
                .instanceGroup(InstanceGroup.of(name + "_cpu", instances, InstanceKind.CPU, List.of())).build();
    }

    /** A decoupled identity model: each request gets {@code responses} copies of its input, then an empty FINAL. */
    public static ModelConfig decoupledModel(String name, int responses) {
        return model(name, 1).toBuilder().decoupled(true).parameter("responses", Integer.toString(responses)).build();
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                List<TensorConfig> ins = ctx.config().inputs();
                List<TensorConfig> outs = ctx.config().outputs();
                boolean decoupled = ctx.config().decoupled();
                int responses = Integer.parseInt(ctx.config().parameters().getOrDefault("responses", "3"));
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) {
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) {
                                for (ScheduledRequest r : batch) {
                                    List<Tensor> out = new ArrayList<>(outs.size());
                                    for (int i = 0; i < ins.size() && i < outs.size(); i++) {
                                        Tensor t = r.request().input(ins.get(i).name());
                                        if (t != null) {
                                            out.add(t.withName(outs.get(i).name()));
                                        }
                                    }
                                    if (decoupled) {
                                        for (int k = 0; k < responses; k++) {
                                            r.sender().send(InferenceResponse.of(out), 0);
                                        }
                                        r.sender().send(null, ResponseSender.FINAL);
                                    } else {
                                        r.sender().sendFinal(InferenceResponse.of(out));
                                    }
                                }
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
}
