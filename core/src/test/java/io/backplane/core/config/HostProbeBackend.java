package io.backplane.core.config;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceKind;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * A backend for host tests of what the core does around a backend: it declares the capabilities
 * and device count it is given, records the instance kinds it is asked for and the input shapes
 * it sees, and answers every input {@code X} with an output {@code X_OUT} over the same data in
 * the shape it received (or the shape the test asks for).
 */
final class HostProbeBackend implements BackendFactory {
    final String name;
    final BackendCapabilities capabilities;
    final int devices;
    final Queue<InstanceKind> kinds = new ConcurrentLinkedQueue<>();
    final Queue<String> seenShapes = new ConcurrentLinkedQueue<>();
    volatile long[] outputShape;

    HostProbeBackend(String name, BackendCapabilities capabilities, int devices) {
        this.name = name;
        this.capabilities = capabilities;
        this.devices = devices;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public BackendCapabilities capabilities() {
        return capabilities;
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext m) {
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext instance) {
                        kinds.add(instance.kind());
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) {
                                for (ScheduledRequest r : batch) {
                                    List<Tensor> outs = new ArrayList<>();
                                    for (Tensor t : r.request().inputs()) {
                                        seenShapes.add(t.name() + java.util.Arrays.toString(t.shape()));
                                        long[] shape = outputShape;
                                        outs.add((shape == null ? t : t.withShape(shape)).withName(t.name() + "_OUT"));
                                    }
                                    r.sender().sendFinal(InferenceResponse.of(outs));
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
            public int deviceCount() {
                return devices;
            }

            @Override
            public void close() {
            }
        };
    }
}
