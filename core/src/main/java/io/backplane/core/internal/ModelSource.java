package io.backplane.core.internal;

import io.backplane.core.repository.FileRoot;
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

    /**
     * Where the files of model {@code name} may really be ({@link FileRoot}: its repository root);
     * {@link FileRoot#NONE} when it has no repository folder.
     */
    default FileRoot fileRoot(String name) {
        return FileRoot.NONE;
    }

    /** Whether the host allows a model's files to be really outside its repository root. */
    default boolean linksOutAllowed() {
        return false;
    }

    /** name → fingerprint of everything that defines the model, for poll-mode change detection. */
    Map<String, String> fingerprints();

    /**
     * One model's definition: its folder, checked config and the versions to serve.
     *
     * @param files where its files may really be: what {@link io.backplane.spi.ModelContext#checkedFile} checks against
     */
    record Definition(String name, Path directory, ModelConfig config, List<Long> versions, String fingerprint, FileRoot files) {
        public Definition {
            versions = List.copyOf(versions);
            java.util.Objects.requireNonNull(files, "files is null");
        }
    }
}
