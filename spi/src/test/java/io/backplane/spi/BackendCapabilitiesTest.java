package io.backplane.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.config.InstanceKind;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class BackendCapabilitiesTest {
    @Test
    void default_isPermissive_soOldPluginsBehaveAsBefore() {
        BackendCapabilities d = BackendCapabilities.DEFAULT;
        assertEquals(Set.of(), d.platforms());
        assertEquals(List.of(), d.modelFileNames());
        assertEquals(InstanceKind.CPU, d.preferredInstanceKind());
        assertTrue(d.batching());
        assertTrue(d.decoupled());
        BackendFactory plain = new BackendFactory() {
            @Override
            public String name() {
                return "plain";
            }

            @Override
            public Backend create(BackendContext context) {
                throw new UnsupportedOperationException();
            }
        };
        assertEquals(d, plain.capabilities());
        assertEquals(0, plain.spiVersion(), "0: the host reads the jar's manifest");
    }

    @Test
    void builder_refusesWhatIsNotAPlaceOrAFileName() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> BackendCapabilities.builder().preferredInstanceKind(InstanceKind.AUTO))
                .getMessage().contains("AUTO"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> BackendCapabilities.builder().modelFileNames("1/model.py")).getMessage()
                .contains("1/model.py"));
        assertThrows(IllegalArgumentException.class, () -> BackendCapabilities.builder().platforms(" "));
    }

    @Test
    void builder_keepsFileOrder() {
        BackendCapabilities c = BackendCapabilities.builder().modelFileNames("model.ptx", "model.cubin").platforms("x").decoupled(false)
                .preferredInstanceKind(InstanceKind.GPU).configSections("optimization").build();
        assertEquals(List.of("model.ptx", "model.cubin"), c.modelFileNames());
        assertEquals(c, BackendCapabilities.builder().modelFileNames("model.ptx", "model.cubin").platforms("x").decoupled(false)
                .preferredInstanceKind(InstanceKind.GPU).configSections("optimization").build());
    }
}
