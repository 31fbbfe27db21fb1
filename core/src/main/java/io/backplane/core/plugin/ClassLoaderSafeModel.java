package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelInstance;

/** Calls a plugin's {@link Model} with the plugin's class loader as context class loader. */
public final class ClassLoaderSafeModel implements Model {
    private final Model delegate;
    private final ClassLoader loader;

    public ClassLoaderSafeModel(Model delegate, ClassLoader loader) {
        this.delegate = requireNonNull(delegate, "backend returned a null model");
        this.loader = requireNonNull(loader, "loader is null");
    }

    @Override
    public ModelInstance createInstance(InstanceContext context) throws Exception {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return new ClassLoaderSafeModelInstance(delegate.createInstance(context), loader);
        }
    }

    @Override
    public void close() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.close();
        }
    }
}
