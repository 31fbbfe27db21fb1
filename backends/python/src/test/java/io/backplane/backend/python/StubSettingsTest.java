package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The python backend's options: unknown keys are refused with the list of known ones. */
class StubSettingsTest {
    @Test
    void backendOptions_unknownKey_refusedListingKnownKeys() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> StubSettings.checkBackendOptions(Map.of("shm_initial_byte", "1048576")));
        assertTrue(e.getMessage().contains("'shm_initial_byte'") && e.getMessage().contains(StubSettings.SHM_INITIAL)
                && e.getMessage().contains(StubSettings.INTERPRETER), e.getMessage());
    }

    @Test
    void backendOptions_tritonKeyName_refusedNamingOurs() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> StubSettings.checkBackendOptions(Map.of("stub-timeout-seconds", "30")));
        assertTrue(e.getMessage().contains("Triton's name; here it is " + StubSettings.STARTUP_TIMEOUT), e.getMessage());
    }

    /** Triton's L0_backend_python starts its server with --backend-config=python,shm-default-byte-size=5242880. */
    @Test
    void tritonShmKeys_acceptedWithTritonsMeaning_oursWinWhenBothAreGiven() {
        Map<String, String> triton = Map.of(StubSettings.TRITON_SHM_DEFAULT, "5242880", StubSettings.TRITON_SHM_GROWTH, "2097152");
        assertDoesNotThrow(() -> StubSettings.checkBackendOptions(triton));
        StubSettings s = StubSettings.resolve(triton, Map.of());
        assertEquals(5242880, s.shmInitialBytes());
        assertEquals(2097152, s.shmGrowthBytes());
        StubSettings ours = StubSettings.resolve(triton, Map.of(StubSettings.SHM_INITIAL, "8388608"));
        assertEquals(8388608, ours.shmInitialBytes());
        assertEquals(0, StubSettings.resolve(Map.of(), Map.of()).shmGrowthBytes(), "by default a region doubles its last chunk");

        BackplaneException small = assertThrows(BackplaneException.class,
                () -> StubSettings.resolve(Map.of(StubSettings.TRITON_SHM_DEFAULT, "1000"), Map.of()));
        assertTrue(small.getMessage().contains("shm-default-byte-size can't be smaller than 1 MiB") && small.getMessage().contains("1000"),
                small.getMessage());
        BackplaneException zero = assertThrows(BackplaneException.class,
                () -> StubSettings.resolve(Map.of(StubSettings.TRITON_SHM_GROWTH, "0"), Map.of()));
        assertTrue(zero.getMessage().contains("shm-growth-byte-size can't be smaller than or equal to zero."), zero.getMessage());
    }

    @Test
    void backendOptions_knownKeys_accepted() {
        assertDoesNotThrow(() -> StubSettings.checkBackendOptions(Map.of(StubSettings.SHM_INITIAL, "1048576", StubSettings.INTERPRETER, "python3")));
    }
}
