package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.concurrent.CompletionStage;

/** Calls a plugin's {@link ModelInstance} with the plugin's class loader as context class loader. */
public final class ClassLoaderSafeModelInstance implements ModelInstance {
    private final ModelInstance delegate;
    private final ClassLoader loader;

    public ClassLoaderSafeModelInstance(ModelInstance delegate, ClassLoader loader) {
        this.delegate = requireNonNull(delegate, "backend returned a null instance");
        this.loader = requireNonNull(loader, "loader is null");
    }

    @Override
    public void execute(List<ScheduledRequest> batch) throws Exception {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.execute(batch);
        }
    }

    @Override
    public boolean isReady() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.isReady();
        }
    }

    @Override
    public CompletionStage<Boolean> checkReady() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.checkReady();
        }
    }

    @Override
    public void close() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.close();
        }
    }
}
