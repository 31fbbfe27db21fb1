package io.backplane.core.config;

import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * What the installed backends declared in their {@link io.backplane.spi.BackendCapabilities}, as
 * the config parser needs it: which backend a Triton {@code platform} or a model file name
 * selects, and which unmodelled {@code config.pbtxt} sections a backend reads itself. The core
 * itself names no backend.
 */
public interface BackendCatalog {
    /** A catalog that knows no backend: platforms stay unresolved, no file infers a backend. */
    BackendCatalog NONE = new BackendCatalog() {
        @Override
        public Optional<String> backendForPlatform(String platform) {
            return Optional.empty();
        }

        @Override
        public Map<String, String> modelFileBackends() {
            return Map.of();
        }

        @Override
        public Set<String> configSections(String backendOrPlatform) {
            return Set.of();
        }
    };

    /** The backend that declared {@code platform}, if any. */
    Optional<String> backendForPlatform(String platform);

    /** Model file name → backend name, in the order a model directory without config.pbtxt tries them. */
    Map<String, String> modelFileBackends();

    /** The top-level config.pbtxt sections the backend named (or serving the platform named) reads itself. */
    Set<String> configSections(String backendOrPlatform);
}
