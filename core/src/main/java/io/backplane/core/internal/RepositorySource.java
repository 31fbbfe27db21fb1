package io.backplane.core.internal;

import io.backplane.core.config.BackendCatalog;
import io.backplane.core.repository.FileRoot;
import io.backplane.core.repository.ModelRepository;
import io.backplane.core.repository.RepositoryModel;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** The model repository folders as a {@link ModelSource}. */
public final class RepositorySource implements ModelSource {
    private final ModelRepository repository;

    /** @param linksOutAllowed whether a model's files may really be outside its repository root ({@link FileRoot}) */
    public RepositorySource(List<Path> roots, BackendCatalog catalog, boolean linksOutAllowed) {
        this.repository = new ModelRepository(roots, catalog, linksOutAllowed);
    }

    @Override
    public List<String> modelNames() {
        return repository.modelNames();
    }

    @Override
    public Definition read(String name) {
        RepositoryModel m = repository.read(name);
        return new Definition(m.name(), m.directory(), m.config(), m.servedVersions(), m.fingerprint(), m.files());
    }

    @Override
    public @org.jspecify.annotations.Nullable Path directory(String name) {
        return repository.directory(name);
    }

    @Override
    public FileRoot fileRoot(String name) {
        return repository.fileRoot(name);
    }

    @Override
    public boolean linksOutAllowed() {
        return repository.linksOutAllowed();
    }

    @Override
    public Map<String, String> fingerprints() {
        return repository.fingerprints();
    }
}
