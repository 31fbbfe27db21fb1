package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.Serial;
import java.util.Set;

/**
 * A failed CUDA driver call: the call, the result code, its name and its description, e.g.
 * {@code cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory}.
 *
 * <p>Its {@link ErrorCode} follows the result: out of memory is RESOURCE_EXHAUSTED, a missing
 * device or driver is UNAVAILABLE, everything else INTERNAL.
 */
public final class CudaException extends BackplaneException {
    @Serial
    private static final long serialVersionUID = 1L;

    /** Results after which the CUDA documentation says the process must be restarted. */
    private static final Set<Integer> STICKY = Set.of(226, 700, 702, 714, 715, 716, 717, 718, 719, 721, 810, 911);

    private final String call;
    private final int result;
    private final String resultName;

    CudaException(String call, int result, String resultName, String description) {
        super(codeFor(result), call + " failed: " + resultName + " (" + result + "): " + description);
        this.call = call;
        this.result = result;
        this.resultName = resultName;
    }

    /** The driver function that failed, e.g. {@code cuLaunchKernel}. */
    public String call() {
        return call;
    }

    /** The {@code CUresult} value. */
    public int result() {
        return result;
    }

    /** The {@code CUresult} name, e.g. {@code CUDA_ERROR_ILLEGAL_ADDRESS}. */
    public String resultName() {
        return resultName;
    }

    /**
     * Whether the error poisons the context: the CUDA documentation says every further call
     * returns the same error and the process must be restarted to use CUDA again (a kernel
     * fault such as {@code CUDA_ERROR_ILLEGAL_ADDRESS}).
     */
    public boolean isSticky() {
        return isSticky(result);
    }

    static boolean isSticky(int result) {
        return STICKY.contains(result);
    }

    private static ErrorCode codeFor(int result) {
        return switch (result) {
            case 2 -> ErrorCode.RESOURCE_EXHAUSTED; // CUDA_ERROR_OUT_OF_MEMORY
            case 3, 4, 34, 35, 46, 100, 101, 999 -> ErrorCode.UNAVAILABLE; // not initialized, deinitialized, stub, insufficient driver, busy, no device, invalid device
            default -> ErrorCode.INTERNAL;
        };
    }
}
