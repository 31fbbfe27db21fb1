package ${package};

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;

/**
 * The {@code ${backendName}} backend: multiplies an FP32 tensor by a factor, a batch of requests
 * in one call. Registered in {@code META-INF/services/io.backplane.spi.BackendFactory}; the host
 * creates it once, the first time a model names it ({@code backend: "${backendName}"} in
 * config.pbtxt).
 */
public final class ${backendClass}BackendFactory implements BackendFactory {
    public static final String NAME = "${backendName}";

    @Override
    public String name() {
        return NAME;
    }

    /**
     * What the host may ask of it: CPU instances, batches of requests ({@code max_batch_size > 0}
     * and {@code dynamic_batching}), one response per request. The host refuses a model that asks
     * for more (decoupled) before it reaches the backend.
     */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().preferredInstanceKind(InstanceKind.CPU).batching(true).decoupled(false).build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION; // copied in at compile time: the host learns which SPI this was built against
    }

    @Override
    public Backend create(BackendContext context) {
        return new ${backendClass}Backend(context);
    }
}
