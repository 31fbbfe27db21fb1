package io.backplane.protocol;

import io.backplane.spi.BackplaneException;
import java.util.Map;

/** The checks the frontends' options share: a bad value is an INVALID_ARGUMENT error naming the frontend, the key and the range. */
public final class FrontendSettings {
    private FrontendSettings() {
    }

    /**
     * The whole number under {@code key}, or {@code dflt} when absent.
     *
     * @param frontend the frontend, for messages (e.g. {@code "grpc frontend"})
     * @throws BackplaneException INVALID_ARGUMENT when the value is not an integer or is outside [min, max]
     */
    public static long number(String frontend, Map<String, String> options, String key, long dflt, long min, long max) {
        String v = options.get(key);
        if (v == null) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid(frontend + ": option " + key + "='" + v + "' is not an integer");
        }
        if (n < min || n > max) {
            throw BackplaneException.invalid(frontend + ": option " + key + "=" + n + " is out of range [" + min + ", " + max + "]");
        }
        return n;
    }
}
