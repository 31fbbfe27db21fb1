package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.SymbolLookup;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class CudaLibraryTest {
    @Test
    void load_missingLibrary_saysWhatIsMissing_andIsTriedOnce() {
        CudaLibrary.Status first = CudaLibrary.load("libcuda-absent-for-test.so.1");
        assertFalse(first.usable());
        assertNull(first.driver());
        assertTrue(first.problem().contains("the CUDA driver library libcuda-absent-for-test.so.1 could not be loaded"), first.problem());
        assertTrue(first.problem().contains("install the NVIDIA driver"), first.problem());
        assertSame(first, CudaLibrary.load("libcuda-absent-for-test.so.1"), "the outcome is cached; dlopen runs once per name");
    }

    @Test
    void open_libraryWithoutCudaSymbols_isUnusableNamingThem() {
        CudaLibrary.Status s = CudaLibrary.open("libnotcuda.so", name -> (SymbolLookup) n -> Optional.empty());
        assertFalse(s.usable());
        assertTrue(s.problem().contains("libnotcuda.so is unusable") && s.problem().contains("cuInit"), s.problem());
    }

    @Test
    void probe_driverOlderThanCuda11_isUnusable() {
        try (FakeCudaDriver d = new FakeCudaDriver(10020, 1, 1 << 20)) {
            CudaLibrary.Status s = CudaLibrary.probe("fake", d);
            assertFalse(s.usable());
            assertEquals("the CUDA driver supports CUDA 10.2 but this backend needs CUDA 11.0 or newer; update the NVIDIA driver", s.problem());
        }
    }

    @Test
    void probe_noDevice_isUnusableNamingTheResult() {
        try (FakeCudaDriver d = new FakeCudaDriver(12040, 0, 1 << 20)) {
            CudaLibrary.Status s = CudaLibrary.probe("fake", d);
            assertFalse(s.usable());
            assertTrue(s.problem().contains("CUDA_ERROR_NO_DEVICE"), s.problem());
        }
    }

    @Test
    void probe_stubLibrary_saysSo() {
        try (FakeCudaDriver d = new FakeCudaDriver(12040, 1, 1 << 20)) {
            d.failNext("cuInit", 34);
            CudaLibrary.Status s = CudaLibrary.probe("fake", d);
            assertTrue(s.problem().contains("is a stub, not a real driver"), s.problem());
        }
    }

    @Test
    void probe_workingDriver_isUsable() {
        try (FakeCudaDriver d = new FakeCudaDriver(13000, 2, 1 << 20)) {
            CudaLibrary.Status s = CudaLibrary.probe("fake", d);
            assertTrue(s.usable());
            assertEquals(2, s.deviceCount());
            assertEquals(13000, s.driverVersion());
            assertEquals("13.0", CudaLibrary.versionString(s.driverVersion()));
        }
    }
}
