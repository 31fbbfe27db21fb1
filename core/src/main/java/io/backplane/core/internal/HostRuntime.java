package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.core.ModelControlMode;
import io.backplane.core.plugin.PluginManager;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import jakarta.inject.Inject;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The running core: start loads models as the control mode says; stop runs in reverse start
 * order (poller, models, backends and plugin class loaders), collecting failures as suppressed
 * exceptions. The state moves only forward, by compare-and-set.
 */
public final class HostRuntime {
    private static final Logger log = LoggerFactory.getLogger(HostRuntime.class);

    public enum State {
        NEW,
        STARTING,
        RUNNING,
        STOPPING,
        STOPPED
    }

    private final AtomicReference<State> state = new AtomicReference<>(State.NEW);
    private final HostOptions options;
    private final HostContext context;
    private final PluginManager plugins;
    private final ModelRegistry registry;
    private @Nullable ScheduledExecutorService poller;

    @Inject
    public HostRuntime(HostOptions options, HostContext context, PluginManager plugins, ModelRegistry registry) {
        this.options = requireNonNull(options, "options is null");
        this.context = requireNonNull(context, "context is null");
        this.plugins = requireNonNull(plugins, "plugins is null");
        this.registry = requireNonNull(registry, "registry is null");
    }

    public HostContext context() {
        return context;
    }

    public PluginManager plugins() {
        return plugins;
    }

    public ModelRegistry registry() {
        return registry;
    }

    public HostOptions options() {
        return options;
    }

    public State state() {
        return state.get();
    }

    /** Loads the initial models. In NONE and POLL modes a model that fails is logged and reported unavailable; the host still starts. */
    public void start() {
        if (!state.compareAndSet(State.NEW, State.STARTING)) {
            throw new IllegalStateException("host already started");
        }
        List<String> toLoad = switch (options.controlMode()) {
            case NONE, POLL -> registry.source().modelNames();
            // Triton's --load-model=*: every model of the repository, as at a start in NONE mode
            case EXPLICIT -> options.initialModels().contains(ModelControlMode.ALL_MODELS) ? registry.source().modelNames() : options.initialModels();
        };
        loadAll(toLoad);
        if (!options.ownWarmup().isZero()) {
            registry.warmOwnPaths(options.ownWarmup());
        }
        if (options.controlMode() == ModelControlMode.POLL) {
            ScheduledExecutorService p = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon().name("backplane-repository-poll").unstarted(r));
            long every = Math.max(1, options.pollInterval().toMillis());
            p.scheduleWithFixedDelay(registry::poll, every, every, TimeUnit.MILLISECONDS);
            poller = p;
        }
        if (!state.compareAndSet(State.STARTING, State.RUNNING)) {
            throw new BackplaneException(ErrorCode.CANCELLED, "the host was stopped while it started");
        }
    }

    /**
     * Loads the initial models, several at once (a Python stub, a GPU context or an ONNX session
     * spends its start mostly waiting): first every model that is not an ensemble, in parallel,
     * then the ensembles one by one, whose composing models are loaded by then (two threads
     * loading one composing model would load it twice). In NONE and POLL modes a failure is
     * logged; in EXPLICIT mode the first one is thrown once every load has ended.
     */
    private void loadAll(List<String> names) {
        List<String> plain = new java.util.ArrayList<>();
        List<String> ensembles = new java.util.ArrayList<>();
        for (String name : names) {
            (isEnsemble(name) ? ensembles : plain).add(name);
        }
        BackplaneException first = null;
        if (plain.size() <= 1) {
            for (String name : plain) {
                first = loadOne(name, first);
            }
        } else {
            java.util.concurrent.ExecutorService pool = Executors.newFixedThreadPool(Math.min(plain.size(), ModelVersion.parallelStarts()),
                    Thread.ofPlatform().daemon().name("backplane-load-", 0).factory());
            List<java.util.concurrent.Future<BackplaneException>> loads = new java.util.ArrayList<>();
            try (pool) { // close() waits for every load: none runs on when start returns or throws
                for (String name : plain) {
                    loads.add(pool.submit(() -> loadOne(name, null)));
                }
                for (var f : loads) {
                    BackplaneException e = f.get();
                    if (e != null && first == null) {
                        first = e;
                    }
                }
            } catch (InterruptedException e) {
                pool.shutdownNow(); // the start is cancelled: the loads in progress are interrupted, close() waits for them
                Thread.currentThread().interrupt();
                throw new BackplaneException(ErrorCode.CANCELLED, "the host's start was cancelled while it loaded its models", e);
            } catch (java.util.concurrent.ExecutionException e) {
                throw BackplaneException.wrap(e.getCause(), "loading the initial models failed");
            }
        }
        for (String name : ensembles) {
            first = loadOne(name, first);
        }
        if (first != null) {
            throw first;
        }
    }

    private boolean isEnsemble(String name) {
        try {
            return io.backplane.spi.config.EnsembleScheduling.isEnsemble(registry.source().read(name).config());
        } catch (RuntimeException e) {
            return false; // its load reports why it cannot be read
        }
    }

    /**
     * Loads one initial model. Returns the failure to throw later (EXPLICIT mode), {@code first}
     * when there is one already or the failure was only logged.
     */
    private @Nullable BackplaneException loadOne(String name, @Nullable BackplaneException first) {
        if (Thread.currentThread().isInterrupted() || state.get() != State.STARTING) {
            throw new BackplaneException(ErrorCode.CANCELLED, "the host's start was cancelled while it loaded its models");
        }
        if (first != null && options.controlMode() == ModelControlMode.EXPLICIT) {
            return first; // explicit mode stops at the first failure
        }
        if (registry.isLoaded(name)) {
            return first; // loaded already as a composing model of an ensemble
        }
        try {
            registry.load(name);
        } catch (BackplaneException e) {
            if (options.controlMode() == ModelControlMode.EXPLICIT || Thread.currentThread().isInterrupted()) {
                return first == null ? e : first;
            }
            log.error("model '{}' is unavailable: {}", name, e.getMessage());
        }
        return first;
    }

    public boolean isRunning() {
        return state.get() == State.RUNNING;
    }

    /** Stops admission, unloads everything within the unload deadline, closes backends and plugin loaders (L10). Idempotent. */
    public void stop() {
        State s = state.get();
        while (s != State.STOPPING && s != State.STOPPED) {
            if (state.compareAndSet(s, State.STOPPING)) {
                break;
            }
            s = state.get();
        }
        if (s == State.STOPPING || s == State.STOPPED) {
            return;
        }
        RuntimeException failure = null;
        ScheduledExecutorService p = poller;
        if (p != null) {
            // No interrupt first: a poll that is reloading a model finishes unloading the old version
            // (an interrupted unload would skip closing its instances); only one that overruns the
            // unload deadline is interrupted.
            p.shutdown();
            try {
                if (!p.awaitTermination(options.unloadTimeout().toMillis(), TimeUnit.MILLISECONDS)) {
                    p.shutdownNow();
                }
            } catch (InterruptedException e) {
                p.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
        try {
            registry.unloadAll();
        } catch (RuntimeException e) {
            failure = e;
        }
        context.close();
        try {
            plugins.close();
        } catch (RuntimeException e) {
            if (failure == null) {
                failure = e;
            } else {
                failure.addSuppressed(e);
            }
        }
        state.set(State.STOPPED);
        if (failure != null) {
            throw failure;
        }
    }
}
