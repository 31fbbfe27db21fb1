package io.backplane.backend.cuda;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;

/**
 * The {@code cuda} backend: kernels from PTX or cubin modules, run through the CUDA driver API.
 *
 * <p>{@link #create} opens the driver library ({@code libcuda.so.1}, or the backend option
 * {@code library}) once per process and never fails because of it: without a driver or a
 * device the backend still starts, and each model that asks for a GPU fails its load with an
 * error naming what is missing.
 *
 * <p>Backend options: {@code library} (driver library name or path, default
 * {@code libcuda.so.1}) and {@code memory_limit_bytes} (the most device memory the backend
 * allocates per GPU, default 0: no limit but the device's).
 */
public final class CudaBackendFactory implements BackendFactory {
    /** The backend's name in {@code config.pbtxt}. */
    public static final String NAME = "cuda";

    @Override
    public String name() {
        return NAME;
    }

    /**
     * {@code model.ptx} and {@code model.cubin}; prefers GPUs (KIND_AUTO instances go to GPU 0 when
     * the driver sees a device); batches; not decoupled.
     */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().modelFileNames("model.ptx", "model.cubin").preferredInstanceKind(InstanceKind.GPU).batching(true)
                .decoupled(false).childRequests(false).build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) {
        String library = context.options().getOrDefault(CudaBackend.OPTION_LIBRARY, CudaLibrary.DEFAULT_LIBRARY);
        return new CudaBackend(CudaLibrary.load(library), context.options());
    }
}
