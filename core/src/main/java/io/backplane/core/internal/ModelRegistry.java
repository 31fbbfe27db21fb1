package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import io.backplane.core.plugin.PluginManager;
import io.backplane.core.config.ErrorText;
import io.backplane.core.repository.FileRoot;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.LoadOverride;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.UnaryOperator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every model the host knows and its loaded versions. Loads and unloads of one model are
 * serialized by that model's lock; requests route without locks through a volatile map that a
 * load replaces in one write (L9: the new versions load beside the old, the swap is atomic, a
 * failed load keeps the old versions serving).
 */
public final class ModelRegistry {
    private static final Logger log = LoggerFactory.getLogger(ModelRegistry.class);
    /** How long past the unload timeout the host's close waits for an unload still closing its instances. */
    static final Duration CLOSE_GRACE = Duration.ofSeconds(60);

    private final ModelSource source;
    private final PluginManager plugins;
    private final HostContext host;
    private final UnaryOperator<ModelConfig> validator;
    private final Map<String, Entry> entries = new ConcurrentHashMap<>();
    private final LoadOverrides overrides;

    private static final class Entry {
        final String name;
        final ReentrantLock lock = new ReentrantLock();
        volatile NavigableMap<Long, ModelVersion> versions = Collections.emptyNavigableMap();
        volatile String lastError = "";
        volatile String fingerprint = "";
        volatile boolean loading;
        /** The thread loading this model now; an unload interrupts it to cancel the load. Guarded by {@code this}. */
        @org.jspecify.annotations.Nullable Thread loader;
        /** An unload interrupted the load: its interrupt is cleared when the load ends. Guarded by {@code this}. */
        boolean cancelled;
        /** The last load failed and nothing serves: the model counts against strict readiness. */
        volatile boolean failed;
        /**
         * Loaded on its own (a load request, a start-up or poll load), not only as an ensemble's
         * composing model: {@code unload_dependents} leaves it loaded.
         */
        volatile boolean explicit;
        /** The private folder of the files the serving versions were loaded from (a load with files), removed when they unload. */
        @org.jspecify.annotations.Nullable Path overrideFolder;

        Entry(String name) {
            this.name = name;
        }
    }

    public ModelRegistry(ModelSource source, PluginManager plugins, HostContext host, UnaryOperator<ModelConfig> validator) {
        this.source = requireNonNull(source, "source is null");
        this.plugins = requireNonNull(plugins, "plugins is null");
        this.host = requireNonNull(host, "host is null");
        this.validator = requireNonNull(validator, "validator is null");
        this.overrides = new LoadOverrides(plugins, source.linksOutAllowed());
        host.registry(this);
    }

    public ModelSource source() {
        return source;
    }

    /**
     * Loads (or reloads) a model: every version its policy serves, beside the current ones; on
     * success they replace the current ones atomically and the old versions unload.
     *
     * @throws BackplaneException the reason the load failed; the old versions keep serving
     */
    public void load(String name) {
        load(name, LoadOverride.NONE);
    }

    /**
     * As {@link #load(String)}, from {@code override}'s config and files instead of the repository's
     * (see {@link LoadOverride}). A bad override is refused before anything changes.
     */
    public void load(String name, LoadOverride override) {
        load(name, override, true);
    }

    private void load(String name, LoadOverride override, boolean explicit) {
        Entry e = entries.computeIfAbsent(name, Entry::new);
        e.lock.lock();
        e.loading = true;
        synchronized (e) {
            e.loader = Thread.currentThread();
            e.cancelled = false;
        }
        @org.jspecify.annotations.Nullable Path created = null;
        try {
            ModelSource.Definition def;
            if (!override.isEmpty()) {
                try {
                    LoadOverrides.Defined d = overrides.define(name, override, source.directory(name), source.fileRoot(name));
                    def = d.definition();
                    created = d.folder();
                } catch (BackplaneException ex) {
                    if (e.versions.isEmpty() && !e.failed && !source.modelNames().contains(name)) {
                        entries.remove(name, e); // a refused override of a model never loaded leaves no trace
                    }
                    if (ex.code() != ErrorCode.NOT_FOUND) {
                        // e.g. a version_policy that selects no version folder: the operator reads it here, not only the client
                        log.error("model '{}': {}", name, ErrorText.bounded(ex).forLog());
                    }
                    throw ex;
                }
            } else {
                try {
                    def = source.read(name);
                } catch (BackplaneException thrown) {
                    BackplaneException ex = ErrorText.bounded(thrown);
                    if (ex.code() == ErrorCode.NOT_FOUND && e.versions.isEmpty()) {
                        entries.remove(name, e); // an unknown name leaves no trace in the index
                        throw ex;
                    }
                    e.lastError = ex.getMessage();
                    e.failed = e.versions.isEmpty();
                    log.error("{}", ex.forLog()); // the config line at fault, if any, in the log only
                    throw ex;
                }
            }
            List<ModelVersion> loaded = new ArrayList<>();
            try {
                ModelConfig declared = def.config();
                if (EnsembleScheduling.isEnsemble(declared)) {
                    loadEnsemble(name, def, loaded);
                } else {
                    String backendName = declared.backend().isEmpty() ? declared.platform() : declared.backend();
                    if (backendName.isEmpty()) {
                        throw BackplaneException.invalid("model '" + name + "' names neither a backend nor a platform in its config.pbtxt; add e.g. backend: \"python\"");
                    }
                    Backend backend = plugins.backend(backendName, name);
                    BackendContext bctx = plugins.contextFor(backendName);
                    long newest = def.versions().isEmpty() ? 1 : def.versions().getLast();
                    ModelConfig completed = backend.autoCompleteConfig(new VersionContext(name, newest, declared, def.directory(), def.files(), bctx, (n, d, k) -> {
                        throw new UnsupportedOperationException("custom metrics are available from loadModel on, not in autoCompleteConfig");
                    }));
                    ModelConfig config = BackendFit.apply(validator.apply(requireNonNull(completed, "autoCompleteConfig returned null")),
                            bctx.backendName(), plugins.capabilities(backendName), backend);
                    BatcherFactory batcher = plugins.batcher(batcherName(config), name);
                    if (def.versions().isEmpty()) {
                        throw BackplaneException.invalid("model '" + name + "' has no version folder to serve in " + def.directory()
                                + "; add a numeric folder such as " + def.directory().resolve("1"));
                    }
                    if (created == null && !override.isEmpty() && resizeInPlace(e, def, config)) {
                        e.fingerprint = def.fingerprint();
                        e.lastError = "";
                        e.explicit |= explicit;
                        return;
                    }
                    for (long v : def.versions()) {
                        loaded.add(ModelVersion.load(name, v, config, def.directory(), def.files(), backend, bctx, batcher, host,
                                plugins.capabilities(backendName)));
                    }
                }
            } catch (Throwable t) {
                boolean interrupted = Thread.interrupted();
                for (ModelVersion v : loaded) {
                    v.unload(host.unloadTimeout());
                }
                LoadOverrides.delete(created);
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
                boolean cancelled;
                synchronized (e) {
                    cancelled = e.cancelled;
                }
                BackplaneException ex = ErrorText.bounded(cancelled && !(t instanceof BackplaneException be && be.code() == ErrorCode.CANCELLED)
                        ? new BackplaneException(ErrorCode.CANCELLED, "the load of model '" + name + "' was cancelled by an unload", t)
                        : BackplaneException.wrap(t, "model '" + name + "' failed to load"));
                e.lastError = ex.getMessage();
                e.failed = e.versions.isEmpty();
                log.error("{}", ex.forLog(), t instanceof BackplaneException ? null : t);
                throw ex;
            }
            NavigableMap<Long, ModelVersion> next = new TreeMap<>();
            for (ModelVersion v : loaded) {
                next.put(v.version(), v);
            }
            NavigableMap<Long, ModelVersion> old = e.versions;
            e.versions = Collections.unmodifiableNavigableMap(next);
            e.fingerprint = def.fingerprint();
            e.lastError = "";
            e.failed = false;
            e.explicit |= explicit;
            Path oldFolder = e.overrideFolder;
            e.overrideFolder = created;
            for (ModelVersion v : old.values()) {
                v.unload(host.unloadTimeout(), true); // the new versions serve already: let the old ones finish their queue
                ModelVersion now = next.get(v.version());
                if (now != null && !EnsembleScheduling.isEnsemble(now.config())) {
                    host.listener().instancesChanged(name, now.version(), now.instanceCount()); // the old copy of the same version said 0
                }
            }
            LoadOverrides.delete(oldFolder);
        } finally {
            synchronized (e) {
                e.loader = null;
                if (e.cancelled) {
                    Thread.interrupted(); // the unload's interrupt ends here, whether the load noticed it or not
                    e.cancelled = false;
                }
            }
            e.loading = false;
            e.lock.unlock();
        }
    }

    /**
     * A load whose config override differs from what the serving versions run only in instance
     * counts changes their instances in place ({@link ModelVersion#resize}): same versions, same
     * folder, nothing reloaded. Returns false (nothing done) when it does not apply; then the load
     * goes on as a reload. A failure of the change is thrown; the versions serve on.
     */
    private boolean resizeInPlace(Entry e, ModelSource.Definition def, ModelConfig config) {
        NavigableMap<Long, ModelVersion> serving = e.versions;
        if (serving.isEmpty() || e.overrideFolder != null || !serving.keySet().equals(new java.util.TreeSet<>(def.versions()))) {
            return false;
        }
        for (ModelVersion v : serving.values()) {
            if (!v.resizableTo(config) || !v.modelDirectory().map(def.directory()::equals).orElse(false)) {
                return false;
            }
        }
        for (ModelVersion v : serving.values()) {
            v.resize(config);
        }
        return true;
    }

    /** Cancels a load of {@code e} in progress (O2: an unload never waits out a long load): interrupts its thread. */
    private static void cancelLoad(Entry e) {
        synchronized (e) {
            Thread t = e.loader;
            if (t != null && t != Thread.currentThread()) {
                log.info("model '{}': cancelling the load in progress", e.name);
                e.cancelled = true;
                t.interrupt();
            }
        }
    }

    /**
     * Loads the versions of an ensemble: its composing models first (explicit mode loads the ones
     * not loaded yet, as Triton does), then the graph is checked against their configs. The
     * ensemble is decoupled when any step is.
     */
    private void loadEnsemble(String name, ModelSource.Definition def, List<ModelVersion> loaded) {
        ModelConfig declared = def.config();
        EnsembleScheduling es = EnsembleScheduling.of(declared).orElseThrow();
        Set<String> chain = LOADING_CHAIN.get();
        if (!chain.add(name)) {
            throw BackplaneException.invalid("ensemble '" + name + "' is one of its own composing models (through " + chain
                    + "); an ensemble must not contain itself");
        }
        try {
            for (EnsembleScheduling.Step s : es.steps()) {
                if (chain.contains(s.modelName())) {
                    throw BackplaneException.invalid("ensemble '" + name + "' " + s.describe() + " names '" + s.modelName()
                            + "', which contains this ensemble (through " + chain + "); ensembles must not contain each other");
                }
                Entry dep = entries.get(s.modelName());
                if (dep == null || dep.versions.isEmpty()) {
                    log.info("loading model '{}', a composing model of ensemble '{}'", s.modelName(), name);
                    try {
                        load(s.modelName(), LoadOverride.NONE, false);
                    } catch (BackplaneException ex) {
                        throw new BackplaneException(ex.code(), "ensemble '" + name + "' " + s.describe() + ": its model failed to load: "
                                + ex.getMessage(), ex);
                    }
                }
            }
        } finally {
            chain.remove(name);
        }
        EnsemblePlan plan = EnsemblePlan.of(declared, s -> route(s.modelName(), s.modelVersion()).config());
        ModelConfig config = validator.apply(plan.decoupled() == declared.decoupled() ? declared : declared.toBuilder().decoupled(true).build());
        List<EnsembleScheduling.Step> steps = plan.steps();
        java.util.function.BooleanSupplier composingReady = () -> {
            for (EnsembleScheduling.Step s : steps) {
                if (!isReady(s.modelName(), s.modelVersion())) {
                    return false;
                }
            }
            return true;
        };
        if (def.versions().isEmpty()) {
            throw BackplaneException.invalid("ensemble '" + name + "' has no version folder to serve in " + def.directory()
                    + "; add an empty numeric folder such as " + def.directory().resolve("1") + ", as Triton requires");
        }
        for (long v : def.versions()) {
            loaded.add(ModelVersion.loadEnsemble(name, v, config, def.directory(), def.files(), plan, composingReady, host));
        }
    }

    /** The ensembles this thread is loading, outermost first: a composing model that is one of them is a cycle. */
    private static final ThreadLocal<Set<String>> LOADING_CHAIN = ThreadLocal.withInitial(java.util.LinkedHashSet::new);

    private static String batcherName(ModelConfig config) {
        String explicit = config.parameters().get("batcher");
        if (explicit != null && !explicit.isBlank()) {
            return explicit;
        }
        if (config.sequenceBatching() != null) {
            return "sequence";
        }
        return config.dynamicBatching() != null ? "dynamic" : "none";
    }

    /** Unloads every version of a model (L7); returns when they are unloaded. Idempotent. */
    public void unload(String name) {
        unload(name, false);
    }

    /**
     * Unloads a model and, with {@code dependents}, then the composing models of the ensemble it
     * was (recursively) that were loaded only as composing models and that no model still loaded
     * uses (Triton's {@code unload_dependents}).
     */
    public void unload(String name, boolean dependents) {
        Set<String> composing = new java.util.LinkedHashSet<>();
        if (dependents) {
            Entry e = entries.get(name);
            if (e != null) {
                for (ModelVersion v : e.versions.values()) {
                    EnsembleScheduling.of(v.config()).ifPresent(es -> es.steps().forEach(st -> composing.add(st.modelName())));
                }
            }
        }
        unloadOne(name);
        for (String c : composing) {
            Entry ce = entries.get(c);
            if (ce == null || ce.explicit || ce.versions.isEmpty() || usedByLoaded(c)) {
                continue;
            }
            log.info("unloading model '{}', a composing model of '{}' (unload_dependents)", c, name);
            unload(c, true);
        }
    }

    /** Whether a loaded ensemble has a step on {@code name}. */
    private boolean usedByLoaded(String name) {
        for (Entry e : entries.values()) {
            for (ModelVersion v : e.versions.values()) {
                var es = EnsembleScheduling.of(v.config());
                if (es.isPresent() && es.get().steps().stream().anyMatch(st -> st.modelName().equals(name))) {
                    return true;
                }
            }
        }
        return false;
    }

    private void unloadOne(String name) {
        Entry e = entries.get(name);
        if (e == null) {
            if (!source.modelNames().contains(name)) {
                throw new BackplaneException(ErrorCode.NOT_FOUND, UNKNOWN_MODEL + "'" + name + "' is not found; known models: " + source.modelNames());
            }
            return;
        }
        cancelLoad(e);
        e.lock.lock();
        try {
            NavigableMap<Long, ModelVersion> old = e.versions;
            e.versions = Collections.emptyNavigableMap();
            e.fingerprint = "";
            e.failed = false; // unloaded on purpose: no longer expected to serve
            e.explicit = false;
            for (ModelVersion v : old.values()) {
                v.unload(host.unloadTimeout());
            }
            LoadOverrides.delete(e.overrideFolder);
            e.overrideFolder = null;
        } finally {
            e.lock.unlock();
        }
    }

    /**
     * The version a request goes to: the one it names, or the newest ready one.
     *
     * @throws BackplaneException NOT_FOUND for an unknown model or version, or one with no version loaded
     */
    ModelVersion route(String name, long version) {
        Entry e = entries.get(name);
        NavigableMap<Long, ModelVersion> versions = e == null ? Collections.emptyNavigableMap() : e.versions;
        if (versions.isEmpty()) {
            // Triton's sentences (its model repository manager's) first: clients match on them. A model the repository
            // has, which could serve after a load, is UNAVAILABLE (a retry may work); Triton answers NOT_FOUND for both.
            if (e == null && !source.modelNames().contains(name)) {
                throw new BackplaneException(ErrorCode.NOT_FOUND, UNKNOWN_MODEL + "'" + name + "' is not found; loaded models: " + loadedNames());
            }
            if (e == null) {
                throw new BackplaneException(ErrorCode.UNAVAILABLE, UNKNOWN_MODEL + "'" + name + "' is not found; it is in the model repository"
                        + " but not loaded (load it through the repository extension)");
            }
            String why = e.lastError.isEmpty() ? (e.loading ? "it is loading" : "it is not loaded") : "its last load failed: " + e.lastError;
            throw new BackplaneException(ErrorCode.UNAVAILABLE, UNKNOWN_MODEL + "'" + name + "' has no available versions; " + why);
        }
        if (version == InferenceRequest.LATEST) {
            for (ModelVersion v : versions.descendingMap().values()) {
                if (v.state() == ModelState.READY) {
                    return v;
                }
            }
            return versions.lastEntry().getValue();
        }
        ModelVersion v = versions.get(version);
        if (v == null) {
            throw new BackplaneException(ErrorCode.NOT_FOUND, UNKNOWN_MODEL + "'" + name + "' version " + version + " is not found; loaded versions: "
                    + versions.keySet());
        }
        return v;
    }

    /** The start of Triton's answer to a request for a model or version it cannot serve. */
    static final String UNKNOWN_MODEL = "Request for unknown model: ";

    /**
     * Routes a request to its version and admits it there, retrying once when it raced a reload's
     * swap. The request is routed once per attempt; the version it reached decides everything
     * else (a decoupled model refuses a sink that takes one response).
     *
     * @return the handle of the accepted request
     * @throws BackplaneException why it was not accepted; the sink was not called
     */
    public RequestHandle admit(InferenceRequest request, ResponseSink sink) {
        for (int attempt = 0;; attempt++) {
            ModelVersion v = route(request.modelName(), request.modelVersion());
            try {
                return v.admit(request, sink).handle();
            } catch (BackplaneException ex) {
                if (ex.code() != ErrorCode.UNAVAILABLE || attempt >= 2) {
                    throw ex;
                }
                Entry e = entries.get(request.modelName());
                if (e == null || e.versions.containsValue(v)) {
                    throw ex;
                }
            }
        }
    }

    /** Whether {@code v} is still one of its model's current versions (no reload swapped it out). */
    boolean isCurrent(ModelVersion v) {
        Entry e = entries.get(v.name());
        return e != null && e.versions.containsValue(v);
    }

    /** Whether some version of {@code name} is loaded (a composing model loaded with its ensemble, at start). */
    public boolean isLoaded(String name) {
        Entry e = entries.get(name);
        return e != null && !e.versions.isEmpty();
    }

    public List<String> loadedNames() {
        List<String> out = new ArrayList<>();
        entries.forEach((n, e) -> {
            if (!e.versions.isEmpty()) {
                out.add(n);
            }
        });
        Collections.sort(out);
        return out;
    }

    public boolean isReady(String name, long version) {
        try {
            return route(name, version).isReady();
        } catch (BackplaneException e) {
            return false;
        }
    }

    /** Whether the version can serve, asking its instances' own checks ({@link ModelVersion#checkReady()}); never fails. */
    public java.util.concurrent.CompletableFuture<Boolean> checkReady(String name, long version) {
        try {
            return route(name, version).checkReady();
        } catch (BackplaneException e) {
            return java.util.concurrent.CompletableFuture.completedFuture(false);
        }
    }

    /** {@link #allReady()}, asking every loaded version's instances' own checks; never fails. */
    public java.util.concurrent.CompletableFuture<Boolean> checkAllReady() {
        List<java.util.concurrent.CompletableFuture<Boolean>> checks = new ArrayList<>();
        for (Entry e : entries.values()) {
            if (e.failed) {
                return java.util.concurrent.CompletableFuture.completedFuture(false);
            }
            if (e.loading) {
                continue;
            }
            for (ModelVersion v : e.versions.values()) {
                checks.add(v.checkReady());
            }
        }
        return java.util.concurrent.CompletableFuture.allOf(checks.toArray(java.util.concurrent.CompletableFuture[]::new))
                .thenApply(x -> checks.stream().allMatch(java.util.concurrent.CompletableFuture::join));
    }

    /**
     * Triton's strict readiness: every model the host was asked to serve is ready — a model whose
     * load failed counts as not ready; one unloaded on purpose does not count.
     */
    public boolean allReady() {
        for (Entry e : entries.values()) {
            if (e.failed) {
                return false;
            }
            if (e.loading) {
                continue;
            }
            for (ModelVersion v : e.versions.values()) {
                if (!v.isReady()) {
                    return false;
                }
            }
        }
        return true;
    }

    public ModelConfig config(String name, long version) {
        return route(name, version).config();
    }

    /** The folder a loaded version's model was read from; empty for a model defined in code. */
    public java.util.Optional<java.nio.file.Path> modelDirectory(String name, long version) {
        return route(name, version).modelDirectory();
    }

    public ModelMetadata metadata(String name, long version) {
        ModelVersion v = route(name, version);
        ModelConfig c = v.config();
        Entry e = requireNonNull(entries.get(name));
        return new ModelMetadata(name, List.copyOf(e.versions.keySet()), c.platform(), c.backend(), tensors(c, c.inputs()), tensors(c, c.outputs()));
    }

    private static List<ModelMetadata.TensorMetadata> tensors(ModelConfig c, List<TensorConfig> list) {
        List<ModelMetadata.TensorMetadata> out = new ArrayList<>();
        for (TensorConfig t : list) {
            List<Long> shape = new ArrayList<>();
            if (c.batches()) {
                shape.add(-1L);
            }
            shape.addAll(t.dims());
            out.add(new ModelMetadata.TensorMetadata(t.name(), t.dataType(), shape));
        }
        return out;
    }

    /** The repository index: every known model, with the state of each loaded version. */
    public List<ModelStatus> index() {
        List<ModelStatus> out = new ArrayList<>();
        java.util.TreeSet<String> names = new java.util.TreeSet<>(entries.keySet());
        try {
            names.addAll(source.modelNames());
        } catch (RuntimeException ex) {
            log.warn("cannot list the model repository: {}", ex.getMessage());
        }
        for (String n : names) {
            Entry e = entries.get(n);
            if (e == null || e.versions.isEmpty()) {
                ModelState st = e != null && e.loading ? ModelState.LOADING : ModelState.UNAVAILABLE;
                out.add(new ModelStatus(n, 0, st, e == null ? "not loaded" : e.lastError.isEmpty() ? "unloaded" : e.lastError));
                continue;
            }
            for (ModelVersion v : e.versions.values()) {
                ModelState st = v.state() == ModelState.READY && !v.isReady() ? ModelState.UNAVAILABLE : v.state();
                out.add(new ModelStatus(n, v.version(), st, v.reason()));
            }
        }
        return out;
    }

    /** Poll mode: loads new and changed models, unloads removed ones; failures are logged. */
    public void poll() {
        Map<String, String> now;
        try {
            now = source.fingerprints();
        } catch (RuntimeException ex) {
            log.warn("repository poll failed: {}", ex.getMessage());
            return;
        }
        now.forEach((name, fp) -> {
            Entry e = entries.get(name);
            if (e != null && fp.equals(e.fingerprint)) {
                return;
            }
            try {
                log.info("repository poll: {} model '{}'", e == null || e.versions.isEmpty() ? "loading" : "reloading", name);
                load(name);
            } catch (BackplaneException ex) {
                entries.get(name).fingerprint = fp; // do not retry an unchanged broken model on every poll
                log.warn("repository poll: model '{}' failed to load: {}", name, ex.getMessage());
            }
        });
        for (Entry e : List.copyOf(entries.values())) {
            if (!now.containsKey(e.name) && !e.versions.isEmpty()) {
                log.info("repository poll: model '{}' was removed; unloading it", e.name);
                unload(e.name);
            }
        }
    }

    /** Unloads everything, models in parallel so the total stays within one deadline (L10). */
    public void unloadAll() {
        try {
            unloadEveryModel();
        } finally {
            overrides.close();
        }
    }

    /** The prefix of the reserved names the host's own warm-up models load under ({@link #warmOwnPaths}). */
    public static final String OWN_WARMUP_PREFIX = "backplane_own_warmup_";

    /**
     * Warms the request path every model of a backend shares (the core's admission, batcher and
     * response path, the backend's transport, codec and hand-off) without a request to any user
     * model (R1): for each backend that serves a loaded model and ships a
     * {@link io.backplane.spi.WarmupModel}, loads that model under a reserved name outside the
     * registry (no client, index, statistics, listener or metric ever sees it), sends it zeros for
     * {@code budget} (the request still running then is cancelled), and unloads it. A failure is
     * logged; the warm-up never fails the host. Interrupted: stops at once, unloading what it loaded.
     */
    public void warmOwnPaths(java.time.Duration budget) {
        java.util.Set<String> backends = new java.util.TreeSet<>();
        for (Entry e : entries.values()) {
            for (ModelVersion v : e.versions.values()) {
                backends.add(v.backendName());
            }
        }
        for (String b : backends) {
            if (Thread.currentThread().isInterrupted()) {
                return;
            }
            plugins.capabilities(b).warmupModel().ifPresent(m -> warmOwnPath(b, m, budget));
        }
    }

    private void warmOwnPath(String backendName, io.backplane.spi.WarmupModel model, java.time.Duration budget) {
        String name = OWN_WARMUP_PREFIX + backendName.replaceAll("[^A-Za-z0-9_]", "_");
        long started = System.nanoTime();
        Path folder = null;
        ModelVersion v = null;
        try {
            folder = overrides.newFolder(name);
            for (Map.Entry<String, byte[]> f : model.versionFiles().entrySet()) {
                Path target = folder.resolve("1").resolve(f.getKey()).normalize();
                Files.createDirectories(target.getParent());
                Files.write(target, f.getValue());
            }
            Backend backend = plugins.backend(backendName, name);
            BackendContext bctx = plugins.contextFor(backendName);
            ModelConfig config = validator.apply(model.config().toBuilder().name(name).parameter(Warmup.PARAMETER, "false").build());
            v = ModelVersion.load(name, 1, config, folder, FileRoot.NONE, backend, bctx, plugins.batcher(batcherName(config), name), host,
                    plugins.capabilities(backendName));
            InferenceRequest request = Warmup.builtinRequest(config);
            if (request == null) {
                log.warn("backend '{}': its warm-up model '{}' has inputs zeros cannot be made for; its request path is not warmed", backendName, name);
                return;
            }
            int sent = Warmup.runFor(name, request, v::admit, budget);
            log.info("backend '{}': its own request path warmed with a model of its own ({} requests, {} ms in all); no user model received"
                    + " a request", backendName, sent, java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
        } catch (IOException | RuntimeException e) {
            log.warn("backend '{}': warming its request path with its own model failed; models serve without it: {}", backendName, e.toString());
        } finally {
            if (v != null) {
                v.unload(host.unloadTimeout());
            }
            LoadOverrides.delete(folder);
        }
    }

    /** The private folder of load files, null before the first load with files (for tests). */
    public @org.jspecify.annotations.Nullable Path loadFilesRoot() {
        return overrides.root();
    }

    private void unloadEveryModel() {
        List<Thread> threads = new ArrayList<>();
        for (String n : List.copyOf(entries.keySet())) {
            threads.add(Thread.ofPlatform().name("backplane-unload-" + n).start(() -> {
                try {
                    unload(n);
                } catch (RuntimeException ex) {
                    log.warn("unloading model '{}' failed", n, ex);
                }
            }));
        }
        // Each unload is bounded (L7: the deadline, then the instances' own bounded close); the wait
        // for them is bounded too, so a plugin whose close never returns cannot hold the host's close.
        long deadline = System.nanoTime() + host.unloadTimeout().plus(CLOSE_GRACE).toNanos();
        for (Thread t : threads) {
            try {
                if (!t.join(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())))) {
                    log.error("{} did not finish within the unload timeout ({}) and {} more; the host closes without waiting for it",
                            t.getName(), host.unloadTimeout(), CLOSE_GRACE);
                }
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Tells {@code listener} about every version now serving, with its load time and instance count (a listener added late). */
    public void replayLoaded(io.backplane.spi.host.HostListener listener) {
        for (Entry e : entries.values()) {
            for (ModelVersion v : e.versions.values()) {
                if (v.state() == ModelState.READY) {
                    try {
                        listener.versionLoaded(e.name, v.version(), v.loadNanos());
                        if (!EnsembleScheduling.isEnsemble(v.config())) {
                            listener.instancesChanged(e.name, v.version(), v.instanceCount());
                        }
                    } catch (RuntimeException ex) {
                        log.warn("host listener {} failed on versionLoaded", listener.getClass().getName(), ex);
                    }
                }
            }
        }
    }

    /** Open requests across every loaded version (for tests and diagnostics). */
    public int sequenceSlotsInUse() {
        int n = 0;
        for (Entry e : entries.values()) {
            for (ModelVersion v : e.versions.values()) {
                n += v.sequenceSlotsInUse();
            }
        }
        return n;
    }

    /** Requests accepted and not yet ended, across all models. */
    public int openRequests() {
        int n = 0;
        for (Entry e : entries.values()) {
            for (ModelVersion v : e.versions.values()) {
                n += v.openRequestIds().size();
            }
        }
        return n;
    }
}
