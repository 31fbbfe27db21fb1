package io.backplane.core.config;

import io.backplane.spi.BackendCapabilities;
import java.util.Collections;
import java.util.LinkedHashMap;
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

        @Override
        public boolean knowsEveryBackend() {
            return false;
        }
    };

    /** A catalog of these backends (name → what it declared), e.g. for parsing outside a host. */
    static BackendCatalog of(Map<String, BackendCapabilities> backends) {
        Map<String, BackendCapabilities> copy = new LinkedHashMap<>(backends);
        Map<String, String> platforms = new LinkedHashMap<>();
        Map<String, String> files = new LinkedHashMap<>();
        copy.forEach((name, caps) -> {
            caps.platforms().forEach(p -> platforms.putIfAbsent(p, name));
            caps.modelFileNames().forEach(f -> files.putIfAbsent(f, name));
        });
        return new BackendCatalog() {
            @Override
            public Optional<String> backendForPlatform(String platform) {
                return Optional.ofNullable(platforms.get(platform));
            }

            @Override
            public Map<String, String> modelFileBackends() {
                return Collections.unmodifiableMap(files);
            }

            @Override
            public Set<String> configSections(String backendOrPlatform) {
                BackendCapabilities caps = copy.get(platforms.getOrDefault(backendOrPlatform, backendOrPlatform));
                return caps == null ? Set.of() : caps.configSections();
            }
        };
    }

    /** The backend that declared {@code platform}, if any. */
    Optional<String> backendForPlatform(String platform);

    /** Model file name → backend name, in the order a model directory without config.pbtxt tries them. */
    Map<String, String> modelFileBackends();

    /** The top-level config.pbtxt sections the backend named (or serving the platform named) reads itself. */
    Set<String> configSections(String backendOrPlatform);

    /** The backend's own name for a name or alias it answers to; {@code nameOrAlias} itself when unknown. */
    default String canonicalName(String nameOrAlias) {
        return nameOrAlias;
    }

    /**
     * Whether this catalog lists every backend that can serve a model (true for a host's), so a
     * platform it does not list can be refused at parse time; false for {@link #NONE}.
     */
    default boolean knowsEveryBackend() {
        return true;
    }
}
