package io.backplane.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SpiTest {
    @Test
    void version_matchesTheBuildsManifestProperty() {
        String built = System.getProperty("backplane.spi.version");
        assertNotNull(built, "surefire passes backplane.spi.version from the parent POM");
        assertEquals(Integer.parseInt(built), Spi.VERSION, "Spi.VERSION and the POM property backplane.spi.version (written into every jar's"
                + " manifest as " + Spi.MANIFEST_ATTRIBUTE + ") must move together");
        assertTrue(Spi.OLDEST_SUPPORTED_VERSION >= 1 && Spi.OLDEST_SUPPORTED_VERSION <= Spi.VERSION);
    }
}
