package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.Backend;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.ModelConfig;

/** Calls a plugin's {@link Backend} with the plugin's class loader as context class loader. */
public final class ClassLoaderSafeBackend implements Backend {
    private final Backend delegate;
    private final ClassLoader loader;

    public ClassLoaderSafeBackend(Backend delegate, ClassLoader loader) {
        this.delegate = requireNonNull(delegate, "delegate is null");
        this.loader = requireNonNull(loader, "loader is null");
    }

    @Override
    public ModelConfig autoCompleteConfig(ModelContext context) throws Exception {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.autoCompleteConfig(context);
        }
    }

    @Override
    public Model loadModel(ModelContext context) throws Exception {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return new ClassLoaderSafeModel(delegate.loadModel(context), loader);
        }
    }

    @Override
    public int deviceCount() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.deviceCount();
        }
    }

    @Override
    public void close() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.close();
        }
    }
}
