package io.backplane.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SettingsTest {
    private final Settings s = Settings.of("model 'm'", Map.of("threads", "2", "mode", "fast", "flag", "on", "batcher", "none"),
            Map.of("threads", " 3 ", "empty", " "));

    @Test
    void of_modelParametersWinOverBackendOptions_valuesStripped() {
        assertEquals(3, s.number("threads", 1, 0, 8));
        assertEquals("fast", s.string("mode", "slow"));
        assertEquals("dflt", s.string("empty", "dflt"));
        assertEquals(7, s.number("absent", 7, 0, 8));
    }

    @Test
    void number_outOfRangeOrNotANumber_namesOwnerKeyValueAndRange() {
        BackplaneException e = assertThrows(BackplaneException.class, () -> s.number("threads", 1, 0, 2));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertEquals("model 'm': parameter threads=' 3 ' is invalid; use a whole number from 0 to 2", e.getMessage());
        e = assertThrows(BackplaneException.class, () -> s.number("mode", 1, 0, Long.MAX_VALUE));
        assertEquals("model 'm': parameter mode='fast' is invalid; use a whole number ≥ 0", e.getMessage());
    }

    @Test
    void flagAndChoice_acceptTheirSpellings_refuseOthers() {
        assertTrue(s.flag("flag", false));
        assertFalse(s.flag("absent", false));
        assertEquals(2, s.choice("mode", 1, Map.of("FAST", 2), "fast"));
        BackplaneException e = assertThrows(BackplaneException.class, () -> s.flag("mode", true));
        assertTrue(e.getMessage().endsWith("use true or false"), e.getMessage());
        e = assertThrows(BackplaneException.class, () -> s.choice("mode", 1, Map.of("SLOW", 2), "slow"));
        assertTrue(e.getMessage().endsWith("mode='fast' is invalid; use slow"), e.getMessage());
    }

    @Test
    void rejectUnknown_namesTheFirstUnknownKey_acceptsTheHostsParameters() {
        Set<String> known = Set.of("threads", "mode", "flag", "empty");
        s.rejectUnknown(known::contains, "the test backend");
        BackplaneException e = assertThrows(BackplaneException.class, () -> s.rejectUnknown(Set.of("threads")::contains, "the test backend"));
        assertEquals("model 'm': parameter 'empty' is not known to the test backend", e.getMessage());
        assertEquals(Set.of("threads", "mode", "flag", "empty"), s.keys());
    }
}
