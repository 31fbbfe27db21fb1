package io.backplane.core.internal;

import io.backplane.core.repository.FileRoot;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Combines models defined in code (no repository folder) with a repository source. A name
 * defined in both is an error, reported when the host starts.
 */
public final class CodeModels implements ModelSource {
    private final Map<String, Definition> defined = new LinkedHashMap<>();
    private final ModelSource repository;

    public CodeModels(List<Definition> definitions, ModelSource repository) {
        this.repository = repository;
        for (Definition d : definitions) {
            if (defined.putIfAbsent(d.name(), d) != null) {
                throw BackplaneException.invalid("model '" + d.name() + "' is defined twice in code");
            }
        }
        for (String n : repository.modelNames()) {
            if (defined.containsKey(n)) {
                throw BackplaneException.invalid("model '" + n + "' is defined in code and also found in the model repository; rename one");
            }
        }
    }

    /** A definition for a model built in code; its folder is a placeholder under {@code root}, and nothing checks its files ({@link FileRoot#NONE}). */
    public static Definition inCode(ModelConfig config, List<Long> versions, Path root) {
        return new Definition(config.name(), root.resolve(config.name()), config, versions.isEmpty() ? List.of(1L) : versions,
                "code:" + config.hashCode(), FileRoot.NONE);
    }

    @Override
    public List<String> modelNames() {
        TreeSet<String> names = new TreeSet<>(defined.keySet());
        names.addAll(repository.modelNames());
        return new ArrayList<>(names);
    }

    @Override
    public Definition read(String name) {
        Definition d = defined.get(name);
        if (d != null) {
            return d;
        }
        return repository.read(name);
    }

    @Override
    public @org.jspecify.annotations.Nullable Path directory(String name) {
        return defined.containsKey(name) ? null : repository.directory(name);
    }

    @Override
    public FileRoot fileRoot(String name) {
        return defined.containsKey(name) ? FileRoot.NONE : repository.fileRoot(name);
    }

    @Override
    public boolean linksOutAllowed() {
        return repository.linksOutAllowed();
    }

    @Override
    public Map<String, String> fingerprints() {
        Map<String, String> out = new LinkedHashMap<>(repository.fingerprints());
        defined.forEach((n, d) -> out.put(n, d.fingerprint()));
        return out;
    }

    /** A source with no models, for hosts without a repository. */
    public static final class EmptySource implements ModelSource {
        private final boolean linksOutAllowed;

        /** @param linksOutAllowed the host's option, for the models loaded with files ({@link ModelSource#linksOutAllowed()}) */
        public EmptySource(boolean linksOutAllowed) {
            this.linksOutAllowed = linksOutAllowed;
        }

        @Override
        public boolean linksOutAllowed() {
            return linksOutAllowed;
        }

        @Override
        public List<String> modelNames() {
            return List.of();
        }

        @Override
        public Definition read(String name) {
            throw new BackplaneException(ErrorCode.NOT_FOUND, ModelRegistry.UNKNOWN_MODEL + "'" + name + "' is not found; no model repository is configured");
        }

        @Override
        public Map<String, String> fingerprints() {
            return Map.of();
        }
    }
}
