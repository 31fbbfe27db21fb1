package io.backplane.backend.python;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;

/** The {@code python} backend: Triton python_backend models in supervised stub processes. */
public final class PythonBackendFactory implements BackendFactory {
    @Override
    public String name() {
        return "python";
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
