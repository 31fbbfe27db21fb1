package io.backplane.protocol;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;

/**
 * The answer both frontends give to Triton's {@code cudasharedmemory} extension where the host
 * has no usable GPU (no GPU backend, no libcuda, no device: its
 * {@code spi.host.DeviceSharedMemory} is not available): a register is UNSUPPORTED (HTTP 501, gRPC
 * UNIMPLEMENTED), led by the sentence Triton's builds without GPU support answer, then what to use
 * instead; status lists no region and unregister succeeds, as in those builds (Triton's clients
 * unregister every CUDA region before they use system shared memory). The extension is then not listed in the server metadata. With a usable GPU
 * the frontends serve the extension over the GPU backend's registry instead.
 */
public final class CudaSharedMemory {
    private CudaSharedMemory() {
    }

    private static final String HINT = "CUDA shared memory is not supported by this server; use system shared memory"
            + " (/v2/systemsharedmemory, gRPC SystemSharedMemoryRegister) and the GPU backend copies to the device itself";

    /** The refusal of a register of {@code region}: Triton's sentence first. */
    public static BackplaneException registerRefused(String region) {
        return new BackplaneException(ErrorCode.UNSUPPORTED, "failed to register CUDA shared memory region: '" + region + "', GPUs not supported; "
                + HINT);
    }
}
