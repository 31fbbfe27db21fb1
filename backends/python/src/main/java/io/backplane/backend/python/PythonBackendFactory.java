package io.backplane.backend.python;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;

/** The {@code python} backend: Triton python_backend models in supervised stub processes. */
public final class PythonBackendFactory implements BackendFactory {
    @Override
    public String name() {
        return "python";
    }

    /** {@code model.py}; CPU (each instance is a stub process); batches; decoupled models allowed. */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().modelFileNames("model.py").preferredInstanceKind(InstanceKind.CPU).batching(true).decoupled(true)
                .build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) throws Exception {
        return PythonBackend.create(context);
    }
}
