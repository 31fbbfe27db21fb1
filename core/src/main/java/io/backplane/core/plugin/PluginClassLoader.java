package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.Enumeration;
import java.util.List;

/**
 * The class loader of one plugin directory. Its parent is the platform class loader, so a
 * plugin sees the JDK and its own jars only; the packages on the allow-list (the SPI, SLF4J,
 * JSpecify) come from the host instead, so that plugin and host agree on the SPI's types and
 * plugins log through the host's logging.
 */
public final class PluginClassLoader extends URLClassLoader {
    /** Package prefixes a plugin shares with the host. */
    public static final List<String> SHARED_PACKAGES = List.of("io.backplane.spi.", "org.slf4j.", "org.jspecify.annotations.");

    static {
        ClassLoader.registerAsParallelCapable();
    }

    private final ClassLoader hostLoader;
    private final String pluginName;

    public PluginClassLoader(String pluginName, List<URL> urls, ClassLoader hostLoader) {
        super("plugin-" + pluginName, urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader());
        this.pluginName = requireNonNull(pluginName, "pluginName is null");
        this.hostLoader = requireNonNull(hostLoader, "hostLoader is null");
    }

    public String pluginName() {
        return pluginName;
    }

    static boolean isShared(String className) {
        for (String p : SHARED_PACKAGES) {
            if (className.startsWith(p)) {
                return true;
            }
        }
        return false;
    }

    @Override
    protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
        if (isShared(name)) {
            return hostLoader.loadClass(name);
        }
        return super.loadClass(name, resolve);
    }

    @Override
    public URL getResource(String name) {
        if (isShared(name.replace('/', '.'))) {
            return hostLoader.getResource(name);
        }
        return super.getResource(name);
    }

    @Override
    public Enumeration<URL> getResources(String name) throws IOException {
        if (isShared(name.replace('/', '.'))) {
            return hostLoader.getResources(name);
        }
        return super.getResources(name);
    }

    @Override
    public String toString() {
        return "PluginClassLoader[" + pluginName + "]";
    }
}
