package io.backplane.spi;

import java.nio.file.Path;
import java.util.Map;

/**
 * What the host tells a backend when creating it. Thread-safe, immutable.
 */
public interface BackendContext {
    /** The backend's name. */
    String backendName();

    /**
     * Host-level backend options ({@code --backend-config=name,key=value} in the server, or the
     * embedded builder's {@code backendOption}). Never null.
     */
    Map<String, String> options();

    /** A private directory the backend may write into; it exists and is removed on host close. */
    Path workDirectory();

    /** The SPI version of the host ({@link Spi#VERSION} as the host was built). */
    int hostSpiVersion();
}
