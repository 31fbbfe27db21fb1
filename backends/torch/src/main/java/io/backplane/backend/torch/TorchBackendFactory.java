package io.backplane.backend.torch;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;
import java.util.Set;

/**
 * The {@code pytorch} backend: TorchScript models ({@code model.pt}) on libtorch, through DJL's
 * PyTorch engine. Selected by {@code backend: "pytorch"} (alias {@code libtorch}), by Triton's
 * {@code platform: "pytorch_libtorch"}, or by a {@code model.pt} in a version folder of a model
 * without config.pbtxt. Registered in {@code META-INF/services/io.backplane.spi.BackendFactory};
 * cheap to construct: libtorch loads at the first model load.
 */
public final class TorchBackendFactory implements BackendFactory {
    /** The backend's name, as Triton names its PyTorch backend. */
    public static final String NAME = "pytorch";

    public TorchBackendFactory() {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Set<String> aliases() {
        return Set.of("libtorch");
    }

    /**
     * Triton's {@code pytorch_libtorch} platform and {@code model.pt}; CPU; batches; answers each
     * request once; starts no child requests. Not declared side-effect free: a TorchScript module
     * may keep state between calls, so the host sends it only what clients or its own
     * {@code model_warmup} ask for.
     */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().platforms("pytorch_libtorch").modelFileNames("model.pt").preferredInstanceKind(InstanceKind.CPU)
                .batching(true).decoupled(false).childRequests(false).build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) {
        return new TorchBackend(context);
    }
}
