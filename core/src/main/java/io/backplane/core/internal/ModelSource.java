package io.backplane.core.internal;

import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** Where model definitions come from: the repository folders, and models defined in code. */
public interface ModelSource {
    /** Every model name this source knows, sorted. */
    List<String> modelNames();

    /**
     * Reads one model's definition now.
     *
     * @throws io.backplane.spi.BackplaneException NOT_FOUND for an unknown name, INVALID_ARGUMENT
     *     for a bad config (naming file and line)
     */
    Definition read(String name);

    /** The repository folder of model {@code name}, without reading its config; null when it has none (unknown, defined in code). */
    default @org.jspecify.annotations.Nullable Path directory(String name) {
        return null;
    }

    /** name → fingerprint of everything that defines the model, for poll-mode change detection. */
    Map<String, String> fingerprints();

    /** One model's definition: its folder, checked config and the versions to serve. */
    record Definition(String name, Path directory, ModelConfig config, List<Long> versions, String fingerprint) {
        public Definition {
            versions = List.copyOf(versions);
        }
    }
}
