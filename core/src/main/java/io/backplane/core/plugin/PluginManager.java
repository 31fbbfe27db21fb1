package io.backplane.core.plugin;

import static java.util.Objects.requireNonNull;

import io.backplane.core.config.BackendCatalog;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Spi;
import io.backplane.spi.host.FrontendFactory;
import io.github.classgraph.ClassGraph;
import io.github.classgraph.ClassInfo;
import io.github.classgraph.ScanResult;
import java.io.IOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.jar.JarFile;
import java.util.jar.Manifest;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finds backends and batchers: those registered in code, those on the host's class path, and
 * those in a backends directory with one {@link PluginClassLoader} per sub-directory.
 *
 * <p>Discovery is defensive and talkative: a broken provider is logged and skipped, a duplicate
 * name is refused naming both sources, and "unknown backend" lists what is available, plus
 * (through a ClassGraph scan) implementations that exist but are not registered.
 */
public final class PluginManager implements AutoCloseable, BackendCatalog {
    private static final Logger log = LoggerFactory.getLogger(PluginManager.class);

    /** A discovered factory, where it came from, and the loader its calls must run under. */
    public record Provided<T>(T factory, String name, ClassLoader loader, String source) {
    }

    private final ClassLoader hostLoader;
    private final List<PluginClassLoader> pluginLoaders = new ArrayList<>();
    private final Map<String, Provided<BackendFactory>> backends = new LinkedHashMap<>();
    private final Map<String, String> backendAliases = new LinkedHashMap<>();
    private final Map<String, BackendCapabilities> capabilities = new LinkedHashMap<>();
    private final Map<String, String> platformBackends = new LinkedHashMap<>();
    private final Map<String, String> modelFileBackends = new LinkedHashMap<>();
    /** Plugins refused at discovery (name → why), so a model that asks for one learns the reason. */
    private final Map<String, String> refused = new LinkedHashMap<>();
    private final Map<String, Provided<BatcherFactory>> batchers = new LinkedHashMap<>();
    private final Map<String, Provided<FrontendFactory>> frontends = new LinkedHashMap<>();
    /** GPU backends' CUDA shared-memory registries ({@code spi.host.DeviceSharedMemory.Provider}), in discovery order. */
    private final List<Provided<io.backplane.spi.host.DeviceSharedMemory.Provider>> deviceSharedMemory = new ArrayList<>();
    private final Map<String, Backend> created = new LinkedHashMap<>();
    private final Map<String, Map<String, String>> backendOptions;
    private final Path workRoot;
    private final List<Path> backendsDirectories;

    public PluginManager(List<BackendFactory> explicitBackends, List<BatcherFactory> explicitBatchers, List<Path> backendsDirectories,
            ClassLoader hostLoader, Map<String, Map<String, String>> backendOptions, Path workRoot) {
        this.hostLoader = requireNonNull(hostLoader, "hostLoader is null");
        this.backendOptions = Map.copyOf(backendOptions);
        this.workRoot = requireNonNull(workRoot, "workRoot is null");
        this.backendsDirectories = List.copyOf(backendsDirectories);
        for (BackendFactory f : explicitBackends) {
            registerBackend(new Provided<>(f, f.name(), loaderOf(f), "registered in code (" + f.getClass().getName() + ")"), true);
        }
        for (BatcherFactory f : explicitBatchers) {
            registerBatcher(new Provided<>(f, f.name(), loaderOf(f), "registered in code (" + f.getClass().getName() + ")"), true);
        }
        discover(hostLoader, "class path");
        for (Path dir : this.backendsDirectories) {
            scanDirectory(dir);
        }
        for (String named : this.backendOptions.keySet()) {
            String key = named.toLowerCase(Locale.ROOT);
            if (!backends.containsKey(key) && !backendAliases.containsKey(key)) {
                log.warn("backend options name backend '{}', which is not installed; they are ignored. Available backends: {}, aliases: {}", named,
                        backendNames(), new TreeSet<>(backendAliases.keySet()));
            }
        }
    }

    private ClassLoader loaderOf(Object o) {
        ClassLoader l = o.getClass().getClassLoader();
        return l == null ? hostLoader : l;
    }

    private void scanDirectory(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw BackplaneException.invalid("backends directory '" + dir + "' does not exist or is not a directory");
        }
        List<Path> subdirs;
        try (Stream<Path> s = Files.list(dir)) {
            subdirs = s.filter(Files::isDirectory).filter(p -> !p.getFileName().toString().startsWith(".")).sorted().toList();
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "cannot list backends directory '" + dir + "': " + e.getMessage(), e);
        }
        for (Path sub : subdirs) {
            List<URL> jars = jarsIn(sub);
            if (jars.isEmpty()) {
                log.warn("plugin directory '{}' has no jars; skipped", sub);
                continue;
            }
            PluginClassLoader loader = new PluginClassLoader(sub.getFileName().toString(), jars, hostLoader);
            pluginLoaders.add(loader);
            discover(loader, "plugin directory " + sub);
        }
    }

    /**
     * Opens one plugin directory exactly as a host opens each sub-folder of its backends directory:
     * the jars in {@code dir} and in {@code dir/lib}, in a {@link PluginClassLoader} of their own
     * whose parent is the platform class loader (only the SPI, SLF4J and JSpecify come from
     * {@code hostLoader}). The conformance kit loads a packaged backend through it. The caller closes
     * the loader.
     *
     * @throws BackplaneException INVALID_ARGUMENT when {@code dir} is not a directory or holds no jar
     */
    public static PluginClassLoader openDirectory(Path dir, ClassLoader hostLoader) {
        if (!Files.isDirectory(dir)) {
            throw BackplaneException.invalid("plugin directory '" + dir + "' does not exist or is not a directory; it is made when the"
                    + " plugin is packaged (mvn package, or verify)");
        }
        List<URL> jars = jarsIn(dir);
        if (jars.isEmpty()) {
            throw BackplaneException.invalid("plugin directory '" + dir + "' has no jars; it should hold the plugin's jar and lib/ with its"
                    + " dependencies");
        }
        return new PluginClassLoader(dir.getFileName().toString(), jars, hostLoader);
    }

    /** The backend factories that {@code loader} itself defines, found through its services files as the host finds them. */
    public static List<BackendFactory> backendFactories(PluginClassLoader loader) {
        return load(BackendFactory.class, loader, "plugin directory " + loader.pluginName());
    }

    private static List<URL> jarsIn(Path dir) {
        List<URL> urls = new ArrayList<>();
        for (Path d : List.of(dir, dir.resolve("lib"))) {
            if (!Files.isDirectory(d)) {
                continue;
            }
            try (Stream<Path> s = Files.list(d)) {
                for (Path jar : s.filter(p -> p.toString().endsWith(".jar")).sorted().toList()) {
                    urls.add(jar.toUri().toURL());
                }
            } catch (IOException e) {
                throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "cannot read plugin directory '" + d + "': " + e.getMessage(), e);
            }
        }
        return urls;
    }

    private void discover(ClassLoader loader, String source) {
        for (BackendFactory f : load(BackendFactory.class, loader, source)) {
            registerBackend(new Provided<>(f, safeName(f::name, f), loader, source + " (" + jarOf(f) + ")"), false);
        }
        for (BatcherFactory f : load(BatcherFactory.class, loader, source)) {
            registerBatcher(new Provided<>(f, safeName(f::name, f), loader, source + " (" + jarOf(f) + ")"), false);
        }
        for (FrontendFactory f : load(FrontendFactory.class, loader, source)) {
            registerFrontend(new Provided<>(f, safeName(f::name, f), loader, source + " (" + jarOf(f) + ")"));
        }
        for (io.backplane.spi.host.DeviceSharedMemory.Provider p : load(io.backplane.spi.host.DeviceSharedMemory.Provider.class, loader, source)) {
            synchronized (this) {
                deviceSharedMemory.add(new Provided<>(p, p.getClass().getName(), loader, source + " (" + jarOf(p) + ")"));
            }
        }
    }

    /** Every provider of {@code service} that {@code loader} itself defines; broken providers are logged and skipped. */
    private static <T> List<T> load(Class<T> service, ClassLoader loader, String source) {
        List<T> out = new ArrayList<>();
        Iterator<T> it = ServiceLoader.load(service, loader).iterator();
        while (true) {
            T f;
            try {
                if (!it.hasNext()) {
                    break;
                }
                f = it.next();
            } catch (ServiceConfigurationError e) {
                log.error("skipping a broken {} provider in {}: {}", service.getSimpleName(), source, e.getMessage(), e);
                continue;
            }
            if (loader instanceof PluginClassLoader && f.getClass().getClassLoader() != loader) {
                continue; // visible through a parent, registered from there
            }
            out.add(f);
        }
        return out;
    }

    private void registerFrontend(Provided<FrontendFactory> p) {
        if (spiVersion("frontend", p, p.factory().spiVersion()) < 0) {
            return;
        }
        Provided<FrontendFactory> existing = frontends.get(p.name());
        if (existing != null) {
            if (existing.factory().getClass() == p.factory().getClass()) {
                return;
            }
            throw BackplaneException.invalid("frontend name '" + p.name() + "' is provided twice: by " + existing.source() + " and by " + p.source()
                    + "; remove one of them");
        }
        frontends.put(p.name(), p);
        log.info("frontend '{}' from {}", p.name(), p.source());
    }

    /**
     * A CUDA shared-memory registry from the first discovered provider that finds a usable GPU
     * (called under the provider's class loader), or {@code DeviceSharedMemory.unavailable()}. The
     * caller owns and closes it.
     */
    public io.backplane.spi.host.DeviceSharedMemory openDeviceSharedMemory() {
        List<Provided<io.backplane.spi.host.DeviceSharedMemory.Provider>> all;
        synchronized (this) {
            all = List.copyOf(deviceSharedMemory);
        }
        for (Provided<io.backplane.spi.host.DeviceSharedMemory.Provider> p : all) {
            Thread t = Thread.currentThread();
            ClassLoader previous = t.getContextClassLoader();
            t.setContextClassLoader(p.loader());
            try {
                io.backplane.spi.host.DeviceSharedMemory d = p.factory().open();
                if (d != null) {
                    log.info("CUDA shared memory from {}", p.source());
                    return d;
                }
            } catch (RuntimeException | LinkageError e) {
                log.warn("the CUDA shared-memory provider of {} failed; the extension is refused: {}", p.source(), e.toString());
            } finally {
                t.setContextClassLoader(previous);
            }
        }
        return io.backplane.spi.host.DeviceSharedMemory.unavailable();
    }

    /** Every discovered frontend, in discovery order. */
    public List<Provided<FrontendFactory>> frontends() {
        return List.copyOf(frontends.values());
    }

    private static String safeName(java.util.function.Supplier<String> name, Object f) {
        String n = name.get();
        if (n == null || n.isBlank()) {
            throw BackplaneException.invalid("plugin " + f.getClass().getName() + " returned an empty name; every backend and batcher needs one");
        }
        return n.toLowerCase(Locale.ROOT);
    }

    private static String jarOf(Object o) {
        var cs = o.getClass().getProtectionDomain().getCodeSource();
        return cs == null || cs.getLocation() == null ? "unknown location" : cs.getLocation().toString();
    }

    private void registerBackend(Provided<BackendFactory> p, boolean explicit) {
        int v = spiVersion("backend", p, p.factory().spiVersion());
        if (v < 0) {
            return;
        }
        Provided<BackendFactory> existing = backends.get(p.name());
        if (existing != null) {
            if (existing.source().startsWith("registered in code")) {
                log.info("backend '{}' registered in code takes precedence over the one in {}", p.name(), p.source());
                return;
            }
            if (existing.factory().getClass() == p.factory().getClass()) {
                return;
            }
            throw BackplaneException.invalid("backend name '" + p.name() + "' is provided twice: by " + existing.source() + " and by " + p.source()
                    + "; remove one of them");
        }
        BackendCapabilities caps;
        try (var _ = ThreadContextClassLoader.swap(p.loader())) {
            caps = requireNonNull(p.factory().capabilities(), "capabilities() returned null");
        } catch (Throwable t) {
            log.error("refusing backend '{}' from {}: its capabilities() failed: {}", p.name(), p.source(), t.toString(), t);
            return;
        }
        backends.put(p.name(), p);
        capabilities.put(p.name(), caps);
        for (String alias : p.factory().aliases()) {
            backendAliases.putIfAbsent(alias.toLowerCase(Locale.ROOT), p.name());
        }
        for (String platform : caps.platforms()) {
            String other = platformBackends.putIfAbsent(platform, p.name());
            if (other != null && !other.equals(p.name())) {
                log.warn("platform '{}' is declared by backends '{}' and '{}'; '{}' serves it", platform, other, p.name(), other);
            }
            backendAliases.putIfAbsent(platform.toLowerCase(Locale.ROOT), p.name());
        }
        for (String file : caps.modelFileNames()) {
            modelFileBackends.putIfAbsent(file, p.name());
        }
        log.info("backend '{}' (SPI version {}) from {}{}", p.name(), v, p.source(), explicit ? "" : "");
    }

    /**
     * The SPI version a plugin was built against: what its factory reports, else the
     * {@value Spi#MANIFEST_ATTRIBUTE} attribute of the jar holding its class; a plugin on the
     * host's own class path without either was built with the host, one in a plugin directory is
     * taken as {@link Spi#OLDEST_SUPPORTED_VERSION}. Returns -1, after logging why, for a version
     * this host cannot load.
     */
    private int spiVersion(String kind, Provided<?> p, int declared) {
        int v = declared;
        String from = "its factory";
        if (v <= 0) {
            Integer m = manifestVersion(p.factory().getClass());
            if (m != null) {
                v = m;
                from = "its jar's manifest";
            } else if (p.loader() instanceof PluginClassLoader) {
                v = Spi.OLDEST_SUPPORTED_VERSION;
                log.warn("{} '{}' from {} declares no SPI version (no {} in its jar's manifest); assuming version {}", kind, p.name(), p.source(),
                        Spi.MANIFEST_ATTRIBUTE, v);
            } else {
                v = Spi.VERSION;
            }
        }
        String why = null;
        if (v > Spi.VERSION) {
            why = "built against SPI version " + v + " (read from " + from + "), but this host has SPI version " + Spi.VERSION
                    + "; upgrade Backplane or build the plugin against SPI " + Spi.VERSION;
        } else if (v < Spi.OLDEST_SUPPORTED_VERSION) {
            why = "built against SPI version " + v + " (read from " + from + "), older than the oldest this host loads ("
                    + Spi.OLDEST_SUPPORTED_VERSION + "); rebuild the plugin against SPI version " + Spi.VERSION;
        }
        if (why != null) {
            log.error("refusing {} '{}' from {}: {}", kind, p.name(), p.source(), why);
            refused.putIfAbsent(p.name(), kind + " '" + p.name() + "' from " + p.source() + " was refused: " + why);
            return -1;
        }
        return v;
    }

    /** The {@value Spi#MANIFEST_ATTRIBUTE} of the jar holding {@code type}, or null when there is none or it is no number. */
    private static @Nullable Integer manifestVersion(Class<?> type) {
        var cs = type.getProtectionDomain().getCodeSource();
        if (cs == null || cs.getLocation() == null || !cs.getLocation().getPath().endsWith(".jar")) {
            return null;
        }
        try (JarFile jar = new JarFile(Path.of(cs.getLocation().toURI()).toFile())) {
            Manifest m = jar.getManifest();
            String value = m == null ? null : m.getMainAttributes().getValue(Spi.MANIFEST_ATTRIBUTE);
            if (value == null) {
                return null;
            }
            try {
                return Integer.parseInt(value.strip());
            } catch (NumberFormatException e) {
                log.warn("{} has {}: '{}', which is not a number; ignored", cs.getLocation(), Spi.MANIFEST_ATTRIBUTE, value);
                return null;
            }
        } catch (IOException | java.net.URISyntaxException | RuntimeException e) {
            log.debug("cannot read the manifest of {}", cs.getLocation(), e);
            return null;
        }
    }

    /** What backend {@code name} (or the backend an alias or platform names) declared; {@link BackendCapabilities#DEFAULT} when unknown. */
    public BackendCapabilities capabilities(String backendOrPlatform) {
        String key = backendOrPlatform.toLowerCase(Locale.ROOT);
        String name = backends.containsKey(key) ? key : backendAliases.get(key);
        return name == null ? BackendCapabilities.DEFAULT : capabilities.getOrDefault(name, BackendCapabilities.DEFAULT);
    }

    @Override
    public String canonicalName(String nameOrAlias) {
        String key = nameOrAlias.toLowerCase(Locale.ROOT);
        return backends.containsKey(key) ? key : backendAliases.getOrDefault(key, nameOrAlias);
    }

    @Override
    public Optional<String> backendForPlatform(String platform) {
        return Optional.ofNullable(platformBackends.get(platform));
    }

    @Override
    public Map<String, String> modelFileBackends() {
        return java.util.Collections.unmodifiableMap(modelFileBackends);
    }

    @Override
    public Set<String> configSections(String backendOrPlatform) {
        return capabilities(backendOrPlatform).configSections();
    }

    private void registerBatcher(Provided<BatcherFactory> p, boolean explicit) {
        if (spiVersion("batcher", p, p.factory().spiVersion()) < 0) {
            return;
        }
        Provided<BatcherFactory> existing = batchers.get(p.name());
        if (existing != null) {
            if (existing.source().startsWith("registered in code") || existing.factory().getClass() == p.factory().getClass()) {
                return;
            }
            throw BackplaneException.invalid("batcher name '" + p.name() + "' is provided twice: by " + existing.source() + " and by " + p.source()
                    + "; remove one of them");
        }
        batchers.put(p.name(), p);
        log.debug("batcher '{}' from {}{}", p.name(), p.source(), explicit ? " (explicit)" : "");
    }

    /** Names of every available backend (not aliases), sorted. */
    public List<String> backendNames() {
        return new TreeSet<>(backends.keySet()).stream().toList();
    }

    public List<String> batcherNames() {
        return new TreeSet<>(batchers.keySet()).stream().toList();
    }

    /** The backend for a config's {@code backend} or {@code platform}, created on first use (once). */
    public synchronized Backend backend(String backendOrPlatform, String forModel) {
        String key = backendOrPlatform.toLowerCase(Locale.ROOT);
        String name = backends.containsKey(key) ? key : backendAliases.get(key);
        if (name == null && refused.containsKey(key)) {
            throw new BackplaneException(ErrorCode.NOT_FOUND, "model '" + forModel + "' asks for backend '" + backendOrPlatform + "', but the "
                    + refused.get(key));
        }
        if (name == null) {
            throw new BackplaneException(ErrorCode.NOT_FOUND, "model '" + forModel + "' asks for backend '" + backendOrPlatform
                    + "', which is not installed (no backend has that name, alias or platform); available backends: " + backendNames() + ", platforms: "
                    + new TreeSet<>(platformBackends.keySet()) + unregisteredHint());
        }
        Backend b = created.get(name);
        if (b != null) {
            return b;
        }
        Provided<BackendFactory> p = requireNonNull(backends.get(name));
        Backend made;
        try (var _ = ThreadContextClassLoader.swap(p.loader())) {
            made = requireNonNull(p.factory().create(contextFor(name)), "backend factory '" + name + "' returned null");
        } catch (Throwable t) {
            throw BackplaneException.wrap(t, "backend '" + name + "' (from " + p.source() + ") failed to start");
        }
        Backend safe = p.loader() == hostLoader ? made : new ClassLoaderSafeBackend(made, p.loader());
        created.put(name, safe);
        return safe;
    }

    /** The context a backend receives: its name, options and a private work directory. */
    public BackendContext contextFor(String name) {
        Path work = workRoot.resolve(name);
        try {
            Files.createDirectories(work);
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INTERNAL, "cannot create work directory '" + work + "': " + e.getMessage(), e);
        }
        Map<String, String> options = optionsFor(name);
        return new BackendContext() {
            @Override
            public String backendName() {
                return name;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }

            @Override
            public Path workDirectory() {
                return work;
            }

            @Override
            public int hostSpiVersion() {
                return Spi.VERSION;
            }
        };
    }

    /**
     * The options given for a backend under its name or any of its aliases ({@code onnxruntime,…}
     * reaches {@code cpu}); a key given under two of them is an error naming both.
     */
    private Map<String, String> optionsFor(String name) {
        Map<String, String> merged = new LinkedHashMap<>();
        Map<String, String> from = new HashMap<>();
        for (Map.Entry<String, Map<String, String>> e : backendOptions.entrySet()) {
            String key = e.getKey().toLowerCase(Locale.ROOT);
            if (!key.equals(name) && !name.equals(backendAliases.get(key))) {
                continue;
            }
            for (Map.Entry<String, String> o : e.getValue().entrySet()) {
                String earlier = from.putIfAbsent(o.getKey(), e.getKey());
                if (earlier != null && !merged.get(o.getKey()).equals(o.getValue())) {
                    throw BackplaneException.invalid("backend option '" + o.getKey() + "' of backend '" + name + "' is given twice, as '" + earlier + ","
                            + o.getKey() + "=" + merged.get(o.getKey()) + "' and '" + e.getKey() + "," + o.getKey() + "=" + o.getValue() + "'; keep one");
                }
                merged.put(o.getKey(), o.getValue());
            }
        }
        return Map.copyOf(merged);
    }

    /** A batcher factory by name, wrapped to run under its plugin's class loader. */
    public BatcherFactory batcher(String name, String forModel) {
        Provided<BatcherFactory> p = batchers.get(name.toLowerCase(Locale.ROOT));
        if (p == null) {
            throw new BackplaneException(ErrorCode.NOT_FOUND, "model '" + forModel + "' asks for batcher '" + name + "', which is not installed; available batchers: "
                    + batcherNames());
        }
        if (p.loader() == hostLoader) {
            return p.factory();
        }
        return new BatcherFactory() {
            @Override
            public String name() {
                return p.name();
            }

            @Override
            public Batcher create(BatcherContext context) {
                try (var _ = ThreadContextClassLoader.swap(p.loader())) {
                    return new ClassLoaderSafeBatcher(p.factory().create(context), p.loader());
                }
            }
        };
    }

    /** Lists BackendFactory implementations that exist but are not registered, for error messages. */
    private String unregisteredHint() {
        List<String> found = new ArrayList<>();
        try {
            List<ClassLoader> loaders = new ArrayList<>(pluginLoaders);
            loaders.add(hostLoader);
            try (ScanResult scan = new ClassGraph().overrideClassLoaders(loaders.toArray(ClassLoader[]::new)).enableClassInfo()
                    .rejectPackages("java", "javax", "jdk", "sun", "com.sun", "com.google", "io.grpc", "io.netty", "io.micrometer", "org.slf4j", "ch.qos",
                            "org.junit", "org.opentest4j", "org.apiguardian", "org.mockito", "net.bytebuddy", "com.tngtech", "io.github.classgraph",
                            "jakarta", "javax.inject", "aopalliance", "org.aopalliance", "org.objenesis", "ai.onnxruntime", "com.fasterxml", "picocli",
                            "org.jspecify", "org.checkerframework", "io.perfmark", "org.codehaus", "android", "org.HdrHistogram")
                    .scan()) {
                for (ClassInfo ci : scan.getClassesImplementing(BackendFactory.class.getName())) {
                    // Backplane's own unregistered factories (the bench tool's, tests') are internal, never a hint
                    if (ci.isAbstract() || ci.isInterface() || ci.getName().startsWith("io.backplane.")) {
                        continue;
                    }
                    boolean registered = backends.values().stream().anyMatch(p -> p.factory().getClass().getName().equals(ci.getName()));
                    if (!registered) {
                        found.add(ci.getName());
                    }
                }
            }
        } catch (RuntimeException e) {
            log.debug("diagnostic scan failed", e);
        }
        if (found.isEmpty()) {
            return backendsDirectories.isEmpty() ? "" : " (backends directories: " + backendsDirectories + ")";
        }
        return ". Found BackendFactory implementations that are not registered: " + found
                + " — list them in META-INF/services/io.backplane.spi.BackendFactory of their jar";
    }

    /** Closes every created backend (reverse order), then the plugin class loaders. */
    @Override
    public synchronized void close() {
        RuntimeException failure = null;
        List<Map.Entry<String, Backend>> list = new ArrayList<>(created.entrySet());
        for (int i = list.size() - 1; i >= 0; i--) {
            try {
                list.get(i).getValue().close();
            } catch (Throwable t) {
                log.warn("backend '{}' failed to close", list.get(i).getKey(), t);
                if (failure == null) {
                    failure = new IllegalStateException("closing backends failed");
                }
                failure.addSuppressed(t);
            }
        }
        created.clear();
        for (PluginClassLoader l : pluginLoaders) {
            try {
                l.close();
            } catch (IOException e) {
                log.warn("closing {} failed", l, e);
            }
        }
        pluginLoaders.clear();
        if (failure != null) {
            throw failure;
        }
    }
}
