package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.ErrorCode;
import org.junit.jupiter.api.Test;

class CudaErrorsTest {
    @Test
    void table_documentedCodes_haveTheirCudaNames() {
        assertEquals("CUDA_SUCCESS", CudaResults.lookup(0).name());
        assertEquals("CUDA_ERROR_OUT_OF_MEMORY", CudaResults.lookup(2).name());
        assertEquals("CUDA_ERROR_STUB_LIBRARY", CudaResults.lookup(34).name());
        assertEquals("CUDA_ERROR_NO_DEVICE", CudaResults.lookup(100).name());
        assertEquals("CUDA_ERROR_INVALID_PTX", CudaResults.lookup(218).name());
        assertEquals("CUDA_ERROR_NOT_FOUND", CudaResults.lookup(500).name());
        assertEquals("CUDA_ERROR_ILLEGAL_ADDRESS", CudaResults.lookup(700).name());
        assertEquals("CUDA_ERROR_UNKNOWN", CudaResults.lookup(999).name());
        assertTrue(CudaResults.size() > 90, "the CUDA 13.0 table has about 100 codes");
    }

    @Test
    void exception_withoutDriver_namesCallCodeAndDescriptionFromTable() {
        CudaException e = CudaErrors.exception("cuMemAlloc_v2", 2);
        assertEquals("cuMemAlloc_v2", e.call());
        assertEquals(2, e.result());
        assertEquals("CUDA_ERROR_OUT_OF_MEMORY", e.resultName());
        assertTrue(e.getMessage().startsWith("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): The API call failed because it was unable"),
                e.getMessage());
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
    }

    @Test
    void exception_driverKnowsTheCode_prefersDriverText() {
        CudaException e = CudaErrors.exception("cuInit", 100, r -> "DRIVER_NAME_" + r, r -> "driver says no device", "");
        assertEquals("cuInit failed: DRIVER_NAME_100 (100): driver says no device", e.getMessage());
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
    }

    @Test
    void exception_driverDoesNotKnowTheCode_fallsBackToTable() {
        CudaException e = CudaErrors.exception("cuLaunchKernel", 719, r -> null, r -> " ", "");
        assertEquals("CUDA_ERROR_LAUNCH_FAILED", e.resultName());
        assertTrue(e.getMessage().contains("An exception occurred on the device while executing a kernel"), e.getMessage());
    }

    @Test
    void exception_unknownCode_isNamedByNumber() {
        CudaException e = CudaErrors.exception("cuFoo", 12345);
        assertEquals("CUDA_ERROR_12345", e.resultName());
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertFalse(CudaResults.isKnown(12345));
    }

    @Test
    void sticky_kernelFaults_areSticky_ordinaryErrorsAreNot() {
        for (int code : new int[] {700, 702, 715, 716, 719}) {
            assertTrue(CudaErrors.exception("x", code).isSticky(), "code " + code);
        }
        for (int code : new int[] {1, 2, 201, 218, 400, 500, 701}) {
            assertFalse(CudaErrors.exception("x", code).isSticky(), "code " + code);
        }
    }
}
