package io.backplane.spi;

/**
 * Facts about this SPI that the host and plugins exchange at bind time.
 */
public final class Spi {
    /**
     * The SPI version. It grows by one whenever a capability is added. A plugin reports the
     * version it was compiled against through {@link BackendFactory#spiVersion()} or
     * {@link BatcherFactory#spiVersion()}; the host refuses plugins built against a newer SPI
     * than its own.
     */
    public static final int VERSION = 1;

    private Spi() {
    }
}
