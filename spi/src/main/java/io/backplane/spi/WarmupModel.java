package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.config.ModelConfig;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A model a backend owns and ships, with which the host warms the backend's own request path
 * (its transport, codec, hand-off: the code every request of every model of the backend runs)
 * before the first client request, without sending a single request to a user model (R1). The
 * host loads it under a reserved name of its own, sends it requests of zeros shaped from
 * {@link #config()} for a bounded time, and unloads it; it is never in the repository index,
 * statistics or metrics, and no client can reach it.
 *
 * <p>Its execute must be free of side effects and cheap (an identity model): the host may send it
 * thousands of requests. Declared through {@link BackendCapabilities.Builder#warmupModel}.
 *
 * @param config its config: inputs and outputs the zeros are shaped from; the host replaces the
 *     name and switches its batcher's delays off
 * @param versionFiles the files of its version folder by relative path (e.g. {@code model.py});
 *     copied, never null
 */
@Experimental
public record WarmupModel(ModelConfig config, Map<String, byte[]> versionFiles) {
    public WarmupModel {
        requireNonNull(config, "config is null");
        requireNonNull(versionFiles, "versionFiles is null");
        Map<String, byte[]> copy = new LinkedHashMap<>();
        for (Map.Entry<String, byte[]> e : versionFiles.entrySet()) {
            String path = requireNonNull(e.getKey(), "a version file path is null");
            if (path.isBlank() || path.startsWith("/") || path.contains("\\") || java.util.Arrays.asList(path.split("/")).contains("..")) {
                throw new IllegalArgumentException("version file path '" + path + "' must be relative and stay inside the version folder");
            }
            copy.put(path, requireNonNull(e.getValue(), "the content of '" + path + "' is null").clone());
        }
        versionFiles = java.util.Collections.unmodifiableMap(copy);
    }

    /** The content of a version file, copied; null when there is none of that name. */
    public byte @org.jspecify.annotations.Nullable [] file(String path) {
        byte[] b = versionFiles.get(path);
        return b == null ? null : b.clone();
    }
}
