package io.backplane.core;

import static java.util.Objects.requireNonNull;

import io.backplane.core.plugin.PluginClassLoader;
import io.backplane.core.plugin.PluginManager;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * One packaged plugin directory, opened exactly as a host opens each folder of its backends
 * directory ({@link BackplaneHost.Builder#backendsDirectory}): the jars in it and in its
 * {@code lib/}, in a class loader of their own whose parent is the platform class loader; only the
 * SPI, SLF4J and JSpecify come from the host. The conformance kit tests a packaged backend through
 * it, so a jar missing from {@code lib/} or a wrong services file fails there rather than at serve
 * time.
 *
 * <p>Its factories are new instances at each {@link #backendFactories()} call. A JNI library binds
 * to the first class loader that loads it: keep one {@code PluginDirectory} per folder for as long
 * as its backends may run (a host keeps it for the process's life), and close it only when none will.
 */
public final class PluginDirectory implements AutoCloseable {
    private final Path path;
    private final PluginClassLoader loader;

    private PluginDirectory(Path path, PluginClassLoader loader) {
        this.path = path;
        this.loader = loader;
    }

    /**
     * Opens {@code dir} with this class's loader as the host's.
     *
     * @throws BackplaneException INVALID_ARGUMENT when {@code dir} is not a directory or holds no jar
     */
    public static PluginDirectory open(Path dir) {
        Path d = requireNonNull(dir, "dir is null").toAbsolutePath().normalize();
        return new PluginDirectory(d, PluginManager.openDirectory(d, PluginDirectory.class.getClassLoader()));
    }

    /** The directory, absolute. */
    public Path path() {
        return path;
    }

    /** The directory's class loader. */
    public ClassLoader classLoader() {
        return loader;
    }

    /** New instances of the backend factories the directory's own jars list in their services files. */
    public List<BackendFactory> backendFactories() {
        return PluginManager.backendFactories(loader);
    }

    /** Closes the class loader (its jars); classes already loaded stay usable. */
    @Override
    public void close() throws IOException {
        loader.close();
    }
}
