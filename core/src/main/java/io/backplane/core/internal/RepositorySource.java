package io.backplane.core.internal;

import io.backplane.core.config.BackendCatalog;
import io.backplane.core.repository.ModelRepository;
import io.backplane.core.repository.RepositoryModel;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** The model repository folders as a {@link ModelSource}. */
public final class RepositorySource implements ModelSource {
    private final ModelRepository repository;

    public RepositorySource(List<Path> roots, BackendCatalog catalog) {
        this.repository = new ModelRepository(roots, catalog);
    }

    @Override
    public List<String> modelNames() {
        return repository.modelNames();
    }

    @Override
    public Definition read(String name) {
        RepositoryModel m = repository.read(name);
        return new Definition(m.name(), m.directory(), m.config(), m.servedVersions(), m.fingerprint());
    }

    @Override
    public @org.jspecify.annotations.Nullable Path directory(String name) {
        return repository.directory(name);
    }

    @Override
    public Map<String, String> fingerprints() {
        return repository.fingerprints();
    }
}
