package io.backplane.core.internal;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** The model repository folders as a {@link ModelSource}. */
public final class RepositorySource implements ModelSource {
    private final List<Path> roots;

    public RepositorySource(List<Path> roots) {
        this.roots = List.copyOf(roots);
    }

    @Override
    public List<String> modelNames() {
        throw new UnsupportedOperationException("repository scanning lands with the config parser: " + roots);
    }

    @Override
    public Definition read(String name) {
        throw new UnsupportedOperationException("repository scanning lands with the config parser: " + roots);
    }

    @Override
    public Map<String, String> fingerprints() {
        throw new UnsupportedOperationException("repository scanning lands with the config parser: " + roots);
    }
}
