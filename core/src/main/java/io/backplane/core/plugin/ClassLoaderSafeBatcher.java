package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.batch.Batcher;
import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Calls a plugin's {@link Batcher} with the plugin's class loader as context class loader. */
public final class ClassLoaderSafeBatcher implements Batcher {
    private final Batcher delegate;
    private final ClassLoader loader;

    public ClassLoaderSafeBatcher(Batcher delegate, ClassLoader loader) {
        this.delegate = requireNonNull(delegate, "batcher factory returned null");
        this.loader = requireNonNull(loader, "loader is null");
    }

    @Override
    public void enqueue(ScheduledRequest request) {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.enqueue(request);
        }
    }

    @Override
    public List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.nextBatch(maxBatchSize, timeout, unit);
        }
    }

    @Override
    public List<ScheduledRequest> nextBatch(int instance, int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.nextBatch(instance, maxBatchSize, timeout, unit);
        }
    }

    @Override
    public void rescheduled(ScheduledRequest request) {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.rescheduled(request);
        }
    }

    @Override
    public void instanceFailed(int instance) {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.instanceFailed(instance);
        }
    }

    @Override
    public int sequenceSlotsInUse() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.sequenceSlotsInUse();
        }
    }

    @Override
    public void cancelled(ScheduledRequest request) {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.cancelled(request);
        }
    }

    @Override
    public List<ScheduledRequest> drain() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.drain();
        }
    }

    @Override
    public int queued() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.queued();
        }
    }

    @Override
    public void close() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            delegate.close();
        }
    }
}
