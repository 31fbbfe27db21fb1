package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;

/** Calls a plugin's {@link FrontendFactory}, and the frontends it makes, with the plugin's class loader as context class loader. */
public final class ClassLoaderSafeFrontendFactory implements FrontendFactory {
    private final FrontendFactory delegate;
    private final ClassLoader loader;

    public ClassLoaderSafeFrontendFactory(FrontendFactory delegate, ClassLoader loader) {
        this.delegate = requireNonNull(delegate, "delegate is null");
        this.loader = requireNonNull(loader, "loader is null");
    }

    @Override
    public String name() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.name();
        }
    }

    @Override
    public int spiVersion() {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return delegate.spiVersion();
        }
    }

    @Override
    public Frontend create(FrontendContext context) throws Exception {
        try (var _ = ThreadContextClassLoader.swap(loader)) {
            return new SafeFrontend(requireNonNull(delegate.create(context), "frontend factory '" + delegate.name() + "' returned null"), loader);
        }
    }

    /** A frontend from a plugin directory, called under its class loader. */
    static final class SafeFrontend implements Frontend {
        private final Frontend delegate;
        private final ClassLoader loader;

        SafeFrontend(Frontend delegate, ClassLoader loader) {
            this.delegate = delegate;
            this.loader = loader;
        }

        @Override
        public void start() throws Exception {
            try (var _ = ThreadContextClassLoader.swap(loader)) {
                delegate.start();
            }
        }

        @Override
        public String endpoint() {
            try (var _ = ThreadContextClassLoader.swap(loader)) {
                return delegate.endpoint();
            }
        }

        @Override
        public void close() {
            try (var _ = ThreadContextClassLoader.swap(loader)) {
                delegate.close();
            }
        }
    }
}
