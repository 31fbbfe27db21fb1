package io.backplane.spi.host;

import static java.util.Objects.requireNonNull;

/**
 * Reads and changes the host's logging at run time (Triton's logging extension, REST
 * {@code /v2/logging} and gRPC {@code LogSettings}). The host that owns the logging backend
 * implements it ({@code backplane serve} does, for Logback) and hands it to its frontends through
 * {@link FrontendContext#logControl()}; without one the frontends do not serve the extension.
 * Thread-safe.
 */
public interface LogControl {
    /** The current settings. */
    Settings settings();

    /**
     * Applies {@code wanted} (every field; frontends merge a client's partial update into
     * {@link #settings()} first) and returns the settings now in force.
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT or UNSUPPORTED naming the setting
     *     and value this logging backend cannot take; nothing changes then
     */
    Settings update(Settings wanted);

    /**
     * Triton's log settings.
     *
     * @param file the log file; empty = the process's standard streams
     * @param info whether INFO messages are logged
     * @param warning whether WARNING messages are logged
     * @param error whether ERROR messages are logged
     * @param verboseLevel 0 = no verbose logging; 1 and up = more detail (DEBUG, TRACE)
     * @param format {@code default} or {@code ISO8601}, as Triton names its formats
     */
    record Settings(String file, boolean info, boolean warning, boolean error, int verboseLevel, String format) {
        public Settings {
            requireNonNull(file, "file is null");
            requireNonNull(format, "format is null");
            if (verboseLevel < 0) {
                throw new IllegalArgumentException("verboseLevel " + verboseLevel + " is negative");
            }
        }
    }
}
