package io.backplane.protocol;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;

/** Model version strings as both protocols carry them: a decimal integer ≥ 1, or empty for the latest. */
public final class ModelVersions {
    private ModelVersions() {
    }

    /**
     * The version {@code text} names.
     *
     * @param text a version from a URL path segment or a message field; empty means "the latest"
     * @return the version, or {@link InferenceRequest#LATEST} for an empty string
     * @throws BackplaneException INVALID_ARGUMENT naming {@code text} when it is not an integer ≥ 1
     */
    public static long parse(String text) {
        requireNonNull(text, "text is null");
        if (text.isEmpty()) {
            return InferenceRequest.LATEST;
        }
        try {
            long n = Long.parseLong(text);
            if (n >= 1) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw BackplaneException.invalid("model version '" + text + "' is invalid: versions are integers ≥ 1, or empty for the latest");
    }
}
