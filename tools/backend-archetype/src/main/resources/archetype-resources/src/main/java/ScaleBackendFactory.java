package ${package};

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;

/**
 * The {@code ${backendName}} backend: multiplies an FP32 tensor by a factor. Registered in
 * {@code META-INF/services/io.backplane.spi.BackendFactory}; the host creates it once, the first
 * time a model names it ({@code backend: "${backendName}"} in config.pbtxt).
 */
public final class ScaleBackendFactory implements BackendFactory {
    public static final String NAME = "${backendName}";

    @Override
    public String name() {
        return NAME;
    }

    /**
     * What the host may ask of it: CPU instances, one request at a time, one response each. The
     * host refuses a model that asks for more (batching, decoupled) before it reaches the backend.
     */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().preferredInstanceKind(InstanceKind.CPU).batching(false).decoupled(false).build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION; // copied in at compile time: the host learns which SPI this was built against
    }

    @Override
    public Backend create(BackendContext context) {
        return new ScaleBackend(context);
    }
}
