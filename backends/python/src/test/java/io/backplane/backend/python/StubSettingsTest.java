package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
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
        BackplaneException e = assertThrows(BackplaneException.class, () -> StubSettings.checkBackendOptions(Map.of("shm-default-byte-size", "1048576")));
        assertTrue(e.getMessage().contains("Triton's name; here it is " + StubSettings.SHM_INITIAL), e.getMessage());
    }

    @Test
    void backendOptions_knownKeys_accepted() {
        assertDoesNotThrow(() -> StubSettings.checkBackendOptions(Map.of(StubSettings.SHM_INITIAL, "1048576", StubSettings.INTERPRETER, "python3")));
    }
}
