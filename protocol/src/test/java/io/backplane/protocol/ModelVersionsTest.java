package io.backplane.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ModelVersionsTest {
    @Test
    void parse_emptyOrNumber_latestOrThatVersion() {
        assertEquals(InferenceRequest.LATEST, ModelVersions.parse(""));
        assertEquals(1, ModelVersions.parse("1"));
        assertEquals(42, ModelVersions.parse("42"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"0", "-1", "x", "1.5", " 1", "99999999999999999999"})
    void parse_notAnIntegerAtLeastOne_invalidArgumentNamingTheValue(String text) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> ModelVersions.parse(text));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertEquals("model version '" + text + "' is invalid: versions are integers ≥ 1, or empty for the latest", e.getMessage());
    }
}
