package io.backplane.core;

import static java.util.Objects.requireNonNull;

import com.google.inject.Guice;
import com.google.inject.Stage;
import io.backplane.core.batch.DynamicBatcherFactory;
import io.backplane.core.batch.NoneBatcherFactory;
import io.backplane.core.batch.SequenceBatcherFactory;
import io.backplane.core.internal.CoreModule;
import io.backplane.core.internal.HostOptions;
import io.backplane.core.internal.MemoryBudget;
import io.backplane.core.internal.ModelNames;
import io.backplane.core.internal.RateLimiter;
import io.backplane.core.internal.HostRuntime;
import io.backplane.core.internal.Spin;
import io.backplane.core.plugin.ClassLoaderSafeFrontendFactory;
import io.backplane.core.plugin.PluginClassLoader;
import io.backplane.core.plugin.PluginManager;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.FrontendFactory;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.MemoryReservation;
import io.backplane.spi.host.ModelMetadata;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatistics;
import io.backplane.spi.host.ModelStatus;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An embedded Backplane host: a model repository, the backends that serve it, and the
 * lifecycle guarantees of the core. Build one with {@link #builder()}; close it when done.
 *
 * <p>Every accepted request ends exactly once: {@link #infer} futures complete exactly once,
 * {@link #stream} observers see exactly one terminal call. A request that cannot be accepted
 * (unknown model, invalid input, model unloading, host closed) fails its future at once; it is
 * never queued.
 *
 * <p>Thread-safe. After {@link #close} no Backplane thread, child process or shared-memory
 * file remains.
 */
public final class BackplaneHost implements InferenceService, AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(BackplaneHost.class);

    /** Backplane's version (from the jar manifest, or "dev" when run from classes). */
    public static final String VERSION = versionFromManifest();

    /** The server name a host reports unless its builder names another. */
    public static final String DEFAULT_SERVER_NAME = "backplane";

    private final HostRuntime runtime;
    private final Path workDirectory;
    /** Where callers blocked in {@code infer(..).get()} spin briefly before they park. */
    private final Spin callerSpin = new Spin(100, TimeUnit.MICROSECONDS);

    private final String serverName;
    private final boolean strictReadiness;
    /** Set by {@link #announceShutdown}: readiness answers false while requests are still served. */
    private volatile boolean shutdownAnnounced;

    private BackplaneHost(HostRuntime runtime, Path workDirectory, String serverName, boolean strictReadiness) {
        this.runtime = runtime;
        this.workDirectory = workDirectory;
        this.serverName = serverName;
        this.strictReadiness = strictReadiness;
    }

    private static String versionFromManifest() {
        String v = BackplaneHost.class.getPackage().getImplementationVersion();
        return v == null ? "dev" : v;
    }

    public static Builder builder() {
        return new Builder();
    }

    // ---- inference ----

    /**
     * Runs a request on a plain (non-decoupled) model. The future completes exactly once: with
     * the response, or exceptionally with a {@link BackplaneException}. Cancelling the future
     * cancels the request (B6).
     */
    @Override
    public CompletableFuture<InferenceResponse> infer(InferenceRequest request) {
        requireNonNull(request, "request is null");
        HostSinks.InferFuture future = new HostSinks.InferFuture(callerSpin);
        try {
            checkRunning();
            future.request = runtime.registry().admit(request, future);
        } catch (BackplaneException e) {
            runtime.context().listener().requestRejected(request.modelName(), HostListener.Outcome.REJECTED);
            future.completeExceptionally(e);
        }
        return future;
    }

    /**
     * Runs a request on any model, delivering every response to {@code observer} (for a plain
     * model: one response, then {@code onComplete}). A request that cannot be accepted gets
     * {@code onError} before this method returns.
     */
    @Override
    public RequestHandle stream(InferenceRequest request, ResponseObserver observer) {
        requireNonNull(request, "request is null");
        requireNonNull(observer, "observer is null");
        HostSinks.ObserverSink sink = new HostSinks.ObserverSink(observer);
        try {
            checkRunning();
            return runtime.registry().admit(request, sink);
        } catch (BackplaneException e) {
            runtime.context().listener().requestRejected(request.modelName(), HostListener.Outcome.REJECTED);
            sink.failed(e);
            return HostSinks.NOT_ACCEPTED;
        }
    }

    private void checkRunning() {
        if (!runtime.isRunning()) {
            throw BackplaneException.unavailable("the Backplane host is " + (runtime.state() == HostRuntime.State.STOPPED ? "closed" : "shutting down")
                    + "; no new requests are accepted");
        }
    }

    // ---- model control ----

    /** Loads (or reloads) a model; returns when it is ready or throws why it could not load. */
    @Override
    public void load(String model) {
        checkRunning();
        checkExplicit();
        ModelNames.check(model);
        try {
            runtime.registry().load(model);
        } catch (BackplaneException e) {
            // Triton's wording, which clients and scripts match on: "failed to load '<m>', <why>".
            throw new BackplaneException(e.code(), "failed to load '" + model + "', " + e.getMessage(), e.logDetail(), e);
        }
    }

    /**
     * Loads (or reloads) a model with a config and/or files in place of the repository's (Triton's
     * repository extension): files go into a private temporary folder the host removes when the
     * model unloads, reloads or the host closes.
     */
    @Override
    public void load(String model, io.backplane.spi.host.LoadOverride override) {
        checkRunning();
        checkExplicit();
        ModelNames.check(model);
        try {
            runtime.registry().load(model, override);
        } catch (BackplaneException e) {
            throw new BackplaneException(e.code(), "failed to load '" + model + "', " + e.getMessage(), e.logDetail(), e);
        }
    }

    /** Unloads a model (L7): returns within the unload deadline with every request ended. */
    @Override
    public void unload(String model) {
        unload(model, false);
    }

    /**
     * Unloads a model (L7) and, with {@code dependents}, the composing models of an ensemble that
     * no other loaded model uses and that were loaded only for it (Triton's
     * {@code unload_dependents}).
     */
    @Override
    public void unload(String model, boolean dependents) {
        checkRunning();
        checkExplicit();
        runtime.registry().unload(model, dependents);
    }

    /** Triton's answer outside explicit mode: UNAVAILABLE with the text its clients match on, then what to do. */
    private void checkExplicit() {
        if (runtime.options().controlMode() != ModelControlMode.EXPLICIT) {
            throw new BackplaneException(ErrorCode.UNAVAILABLE, "explicit model load / unload is not allowed if polling is enabled"
                    + " (model control mode is " + runtime.options().controlMode() + "; start the host with ModelControlMode.EXPLICIT,"
                    + " or `backplane serve --model-control-mode explicit`)");
        }
    }

    /** Live: the host is running. */
    @Override
    public boolean isLive() {
        return runtime.isRunning();
    }

    /**
     * Ready: running, and (under strict readiness, the default) every loaded model has a ready
     * version, each asked through its instances' own checks ({@link #checkReady()}); waits for
     * those checks (a python model's {@code is_ready()}: at most 5 s).
     */
    @Override
    public boolean isReady() {
        return join(checkReady());
    }

    /**
     * Tells whoever checks readiness that this host is about to stop: from now on {@link #isReady()}
     * and {@link #checkReady()} (so REST {@code /v2/health/ready}, gRPC {@code ServerReady} and
     * {@code grpc.health.v1.Health}) answer false, while requests are still admitted and served as
     * before. A balancer that checks readiness then stops sending before {@link #close()} refuses
     * new work ({@code backplane serve --drain-delay-secs}). Cannot be undone; idempotent.
     */
    public void announceShutdown() {
        shutdownAnnounced = true;
    }

    /** The name this host reports in server metadata (REST {@code GET /v2}, gRPC {@code ServerMetadata}). */
    @Override
    public String serverName() {
        return serverName;
    }

    /**
     * {@link #isReady()} without blocking: completes when the instances' own readiness checks
     * answered ({@link io.backplane.spi.ModelInstance#checkReady()}); never fails.
     */
    @Override
    public CompletableFuture<Boolean> checkReady() {
        if (!runtime.isRunning() || shutdownAnnounced) {
            return CompletableFuture.completedFuture(false);
        }
        return strictReadiness ? runtime.registry().checkAllReady() : CompletableFuture.completedFuture(true);
    }

    /**
     * Whether {@code version} of {@code model} (or its newest, with {@link InferenceRequest#LATEST})
     * can serve now: loaded, and an instance ready by its own check; waits for those checks (a
     * python model's {@code is_ready()}: at most 5 s).
     */
    @Override
    public boolean isModelReady(String model, long version) {
        return join(checkModelReady(model, version));
    }

    /** {@link #isModelReady(String, long)} without blocking; never fails. */
    @Override
    public CompletableFuture<Boolean> checkModelReady(String model, long version) {
        if (!runtime.isRunning()) {
            return CompletableFuture.completedFuture(false);
        }
        return runtime.registry().checkReady(model, version);
    }

    private static boolean join(CompletableFuture<Boolean> check) {
        try {
            return check.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } catch (java.util.concurrent.ExecutionException e) {
            return false;
        }
    }

    public boolean isModelReady(String model) {
        return isModelReady(model, InferenceRequest.LATEST);
    }

    public ModelMetadata metadata(String model) {
        return runtime.registry().metadata(model, InferenceRequest.LATEST);
    }

    @Override
    public ModelMetadata metadata(String model, long version) {
        return runtime.registry().metadata(model, version);
    }

    /** The config a loaded model version runs with (after auto-complete). */
    @Override
    public ModelConfig modelConfig(String model, long version) {
        return runtime.registry().config(model, version);
    }

    @Override
    public java.util.Optional<Path> modelDirectory(String model, long version) {
        return runtime.registry().modelDirectory(model, version);
    }

    /** Every model in the repository and each loaded version's state. */
    @Override
    public List<ModelStatus> repositoryIndex() {
        return runtime.registry().index();
    }

    @Override
    public List<ModelStatistics> statistics(String model, long version) {
        requireNonNull(model, "model is null");
        List<ModelStatistics> out = new ArrayList<>();
        for (ModelStatus s : repositoryIndex()) {
            if (s.state() == ModelState.READY && (model.isEmpty() || s.name().equals(model))
                    && (version == InferenceRequest.LATEST || s.version() == version)) {
                out.add(runtime.context().statistics().snapshot(s.name(), s.version()));
            }
        }
        if (out.isEmpty() && !model.isEmpty()) {
            throw BackplaneException.notFound(version == InferenceRequest.LATEST
                    ? "requested model '" + model + "' is not found"
                    : "requested model '" + model + "' version " + version + " is not found");
        }
        return out;
    }

    /**
     * A CUDA shared-memory registry (Triton's {@code cudasharedmemory} regions) from the GPU
     * backend found on the class path or in the backends directory, or one that is not
     * {@link io.backplane.spi.host.DeviceSharedMemory#available() available} when there is no
     * usable GPU. The caller owns and closes it.
     */
    public io.backplane.spi.host.DeviceSharedMemory openDeviceSharedMemory() {
        return runtime.plugins().openDeviceSharedMemory();
    }

    /** Names of the installed backends. */
    public List<String> backends() {
        return runtime.plugins().backendNames();
    }

    /**
     * The frontend factories (protocol servers, host plugins) found on the class path and in the
     * backends directory, by name, in discovery order. Factories from a plugin directory, and the
     * frontends they create, are called under that plugin's class loader. The caller creates,
     * starts and closes the frontends, before it closes this host.
     */
    public Map<String, FrontendFactory> frontendFactories() {
        Map<String, FrontendFactory> out = new LinkedHashMap<>();
        for (PluginManager.Provided<FrontendFactory> p : runtime.plugins().frontends()) {
            out.put(p.name(), p.loader() instanceof PluginClassLoader ? new ClassLoaderSafeFrontendFactory(p.factory(), p.loader()) : p.factory());
        }
        return Collections.unmodifiableMap(out);
    }

    /** Requests accepted and not yet ended, across all models. */
    public int openRequests() {
        return runtime.registry().openRequests();
    }

    /**
     * Sequence slots held across all loaded models (sequence batching): 0 once every sequence
     * ended, went idle or lost its instance. A hygiene figure for tests and diagnostics.
     */
    public int sequenceSlotsInUse() {
        return runtime.registry().sequenceSlotsInUse();
    }

    /** Second releases suppressed since start (L4); each was a race that the core absorbed. */
    public long duplicateReleases() {
        return runtime.context().duplicateReleases();
    }

    @Override
    public void addListener(HostListener listener) {
        runtime.context().addListener(listener);
        runtime.registry().replayLoaded(listener);
    }

    @Override
    public List<io.backplane.spi.metrics.MetricFamilySnapshot> customMetrics() {
        return runtime.context().customMetrics().snapshot();
    }

    /**
     * The custom-metrics registry for a frontend or another host-level part named {@code owner}
     * ({@link io.backplane.spi.host.FrontendContext#metrics()}): its families are in
     * {@link #customMetrics()}, beside the models'. Whoever uses it closes the families and
     * metrics it creates; each goes when its last reference closes.
     */
    public io.backplane.spi.metrics.MetricRegistry frontendMetrics(String owner) {
        return runtime.context().customMetrics().scope(requireNonNull(owner, "owner is null"));
    }

    /**
     * Reserves bytes of the host's memory budget (O1): frontends call it before they read a body.
     * Embedded callers already hold their tensors, so {@link #infer} and {@link #stream} take
     * nothing from it; the default queue bound limits what they can queue.
     */
    @Override
    public MemoryReservation reserveMemory(long bytes, String what) {
        return runtime.context().memory().reserve(bytes, what);
    }

    @Override
    public MemoryReservation.Usage memoryUsage() {
        return runtime.context().memory().usage();
    }

    @Override
    public boolean modelControlEnabled() {
        return runtime.options().controlMode() == ModelControlMode.EXPLICIT;
    }

    @Override
    public String version() {
        return VERSION;
    }

    public ModelControlMode controlMode() {
        return runtime.options().controlMode();
    }

    /** How long {@link #close()} lets each model finish its open requests before it fails them (the builder's {@code unloadTimeout}). */
    public Duration unloadTimeout() {
        return runtime.options().unloadTimeout();
    }

    /** Stops admission, unloads every model within its deadline, closes backends and plugins (L10). Idempotent. */
    @Override
    public void close() {
        try {
            runtime.stop();
        } finally {
            HostWorkDirectory.delete(workDirectory);
        }
    }

    /** Checks a config again after a backend auto-completed it. */
    private static ModelConfig checkCompleted(ModelConfig c) {
        io.backplane.core.config.ModelConfigValidator.validate(c, "config of model '" + c.name() + "' after auto-complete");
        return c;
    }

    // ---- builder ----

    /** Builds a host; not thread-safe. {@link #build()} starts it and loads the initial models. */
    public static final class Builder {
        private final List<Path> repositories = new ArrayList<>();
        private final List<Path> backendsDirectories = new ArrayList<>();
        private @Nullable ModelControlMode controlMode;
        private final List<String> initialModels = new ArrayList<>();
        private Duration pollInterval = Duration.ofSeconds(15);
        private Duration unloadTimeout = Duration.ofSeconds(30);
        private Duration restartBackoffMin = Duration.ofMillis(100);
        private Duration restartBackoffMax = Duration.ofSeconds(10);
        private final Map<String, Map<String, String>> backendOptions = new LinkedHashMap<>();
        private final List<BackendFactory> backends = new ArrayList<>();
        private final List<BatcherFactory> batchers = new ArrayList<>();
        private final List<HostOptions.CodeModel> codeModels = new ArrayList<>();
        private Ticker ticker = Ticker.system();
        private final List<HostListener> listeners = new ArrayList<>();
        private @Nullable ClassLoader classLoader;
        private boolean callerRuns;
        private boolean strictReadiness = true;
        private boolean builtinWarmup;
        private Duration ownWarmup = Duration.ZERO;
        private long memoryBudget;
        private int defaultMaxQueueSize = HostOptions.Limits.DEFAULT_MAX_QUEUE_SIZE;
        private int maxInstancesPerModel = HostOptions.Limits.DEFAULT_MAX_INSTANCES_PER_MODEL;
        private int maxInstancesPerHost = HostOptions.Limits.DEFAULT_MAX_INSTANCES_PER_HOST;
        private long responseCacheBytes;
        private String serverName = DEFAULT_SERVER_NAME;
        private boolean allowLinksOutsideRepository;
        private RateLimitMode rateLimit = RateLimitMode.OFF;
        private final List<RateLimiter.ResourceLimit> rateLimitResources = new ArrayList<>();

        private Builder() {
        }

        /** A model repository folder in Triton's layout; repeatable. */
        public Builder modelRepository(Path path) {
            repositories.add(requireNonNull(path, "path is null"));
            return this;
        }

        /**
         * A folder with one sub-folder per backend or plugin, each loaded by its own class loader;
         * repeatable: each call adds a folder (a backend name found twice is an error).
         */
        public Builder backendsDirectory(Path path) {
            backendsDirectories.add(requireNonNull(path, "path is null"));
            return this;
        }

        /** Default: EXPLICIT when models are named with {@link #loadModel}, else NONE. */
        public Builder modelControlMode(ModelControlMode mode) {
            controlMode = requireNonNull(mode, "mode is null");
            return this;
        }

        /** A model to load at start in EXPLICIT mode; repeatable. {@link ModelControlMode#ALL_MODELS} ({@code "*"}, Triton's {@code --load-model=*}) loads every model of the repository. */
        public Builder loadModel(String name) {
            initialModels.add(requireNonNull(name, "name is null"));
            return this;
        }

        /** How often POLL mode rescans the repository. */
        public Builder pollInterval(Duration interval) {
            pollInterval = positive(interval, "pollInterval");
            return this;
        }

        /** How long an unload waits for open requests before failing them (L7). Default 30 s. */
        public Builder unloadTimeout(Duration timeout) {
            unloadTimeout = positive(timeout, "unloadTimeout");
            return this;
        }

        /** The capped exponential backoff between instance restarts (L8). Default 100 ms to 10 s. */
        public Builder restartBackoff(Duration min, Duration max) {
            restartBackoffMin = positive(min, "min");
            restartBackoffMax = positive(max, "max");
            if (max.compareTo(min) < 0) {
                throw new IllegalArgumentException("restart backoff max " + max + " is below min " + min);
            }
            return this;
        }

        /** An option passed to one backend ({@link io.backplane.spi.BackendContext#options()}). */
        public Builder backendOption(String backend, String key, String value) {
            backendOptions.computeIfAbsent(requireNonNull(backend, "backend is null"), b -> new LinkedHashMap<>())
                    .put(requireNonNull(key, "key is null"), requireNonNull(value, "value is null"));
            return this;
        }

        /** Registers a backend in code; it wins over a discovered backend of the same name. */
        public Builder backend(BackendFactory factory) {
            backends.add(requireNonNull(factory, "factory is null"));
            return this;
        }

        /** Registers a batcher in code. */
        public Builder batcher(BatcherFactory factory) {
            batchers.add(requireNonNull(factory, "factory is null"));
            return this;
        }

        /** A model defined in code rather than in a repository folder; served versions default to [1]. */
        public Builder model(ModelConfig config, long... versions) {
            codeModels.add(new HostOptions.CodeModel(requireNonNull(config, "config is null"), Arrays.stream(versions).boxed().toList()));
            return this;
        }

        /** The monotonic clock for every delay and timeout (tests inject one). */
        public Builder ticker(Ticker t) {
            ticker = requireNonNull(t, "ticker is null");
            return this;
        }

        public Builder listener(HostListener l) {
            listeners.add(requireNonNull(l, "listener is null"));
            return this;
        }

        /** The class loader whose class path is searched for backends (default: this class's loader). */
        public Builder classLoader(ClassLoader loader) {
            classLoader = requireNonNull(loader, "loader is null");
            return this;
        }

        /**
         * Caller-runs: a request to a model without dynamic batching executes on the calling
         * thread when an instance is idle, skipping the hand-off to the instance's worker thread
         * (lowest latency for embedded hosts whose callers are ordinary threads); for an ensemble,
         * the caller's thread runs each step whose instance is idle, one after the other. Off by
         * default: do not enable it when callers are event-loop threads that must never block.
         */
        public Builder callerRuns(boolean on) {
            callerRuns = on;
            return this;
        }

        /**
         * Triton's {@code --strict-readiness}: when true (the default) the host is ready only while
         * every model it was asked to serve is ready; when false it is ready whenever it runs,
         * whatever its models' state (model readiness is unaffected).
         */
        public Builder strictReadiness(boolean on) {
            strictReadiness = on;
            return this;
        }

        /**
         * Whether a model may be served from files whose real path (every symbolic link followed)
         * is outside the repository root it was found in. Off by default: such a model fails to
         * load (INVALID_ARGUMENT naming the link and where it points), and so does a file a backend
         * opens by name there ({@code default_model_filename}, {@code label_filename}, a warm-up
         * {@code input_data_file}, the Python backend's {@code EXECUTION_ENV_PATH}). Links that stay
         * inside the root are always fine (Kubernetes mounts ConfigMaps through such links), and so
         * is a root that is itself a link. {@code backplane serve --allow-links-outside-repository}.
         * See docs/model-repository.md.
         */
        public Builder allowLinksOutsideRepository(boolean on) {
            allowLinksOutsideRepository = on;
            return this;
        }

        /**
         * Triton's {@code --rate-limit}: with {@link RateLimitMode#EXECUTION_COUNT} an instance whose
         * group has a {@code rate_limiter} executes only when the resources it lists are free, and
         * waiting instances are chosen by execution count times priority;
         * {@link RateLimitMode#OFF} (the default, as in Triton) ignores every {@code rate_limiter}.
         * See docs/model-repository.md.
         */
        public Builder rateLimit(RateLimitMode mode) {
            rateLimit = requireNonNull(mode, "mode is null");
            return this;
        }

        /**
         * Triton's {@code --rate-limit-resource=<name>:<count>}: {@code count} copies of resource
         * {@code name} on every device (one pool, when the models declare it global). Without it a
         * resource has as many copies as the most any loaded instance asks for. Repeatable.
         *
         * @throws IllegalArgumentException when the name is blank or the count negative
         */
        public Builder rateLimitResource(String name, int count) {
            rateLimitResources.add(new RateLimiter.ResourceLimit(name, count, -1));
            return this;
        }

        /**
         * Triton's {@code --rate-limit-resource=<name>:<count>:<device>}: {@code count} copies of
         * resource {@code name} on GPU {@code device} (CPU instances count as device 0). For a
         * resource the models declare global the device is ignored: its pool has the largest count
         * given. Repeatable.
         *
         * @throws IllegalArgumentException when the name is blank, or the count or device negative
         */
        public Builder rateLimitResource(String name, int count, int device) {
            if (device < 0) {
                throw new IllegalArgumentException("rate-limit resource '" + name + "': device " + device + " is negative");
            }
            rateLimitResources.add(new RateLimiter.ResourceLimit(name, count, device));
            return this;
        }

        /**
         * The built-in warm-up: before a model without {@code model_warmup} reports ready, a few
         * requests of zeros shaped from its config's inputs run through its request path, and none
         * of them reaches statistics, metrics or the response cache. Off by default here
         * ({@code backplane serve} turns it on); a model's parameter {@code builtin_warmup}
         * ({@code "true"}, {@code "false"} or a count) overrides it. See docs/performance.md.
         */
        public Builder builtinWarmup(boolean on) {
            builtinWarmup = on;
            return this;
        }

        /**
         * The host's own warm-up (R1): once the initial models are loaded, for each backend that
         * serves one of them and ships a warm-up model of its own
         * ({@link io.backplane.spi.BackendCapabilities#warmupModel()}: the Python backend does), the
         * host loads that model under a reserved name no client can reach, sends it zeros for
         * {@code budget}, and unloads it, before {@link #build()} returns: the request path every
         * model of the backend shares (admission, batcher, response path, the backend's transport and
         * codec) runs warm from the first client request, and no user model receives a request it
         * did not ask for. Nothing of it reaches statistics, listeners or metrics. Off
         * ({@link Duration#ZERO}) by default here; {@code backplane serve} turns it on for 1 s.
         */
        public Builder ownWarmup(Duration budget) {
            requireNonNull(budget, "budget is null");
            if (budget.isNegative() || budget.compareTo(Duration.ofMinutes(1)) > 0) {
                throw new IllegalArgumentException("ownWarmup " + budget + " must be between 0 (off) and 1 minute");
            }
            ownWarmup = budget;
            return this;
        }

        /**
         * The host-wide budget of bytes that requests arriving through frontends may hold at once,
         * from before their bodies are read until their responses are sent (O1). Default: a quarter
         * of the smaller of the heap limit and the direct-memory limit.
         */
        public Builder memoryBudget(long bytes) {
            if (bytes <= 0) {
                throw new IllegalArgumentException("memoryBudget " + bytes + " must be positive");
            }
            memoryBudget = bytes;
            return this;
        }

        /**
         * How many requests a model version may queue when its config sets no
         * {@code max_queue_size}; above it requests are refused at once (RESOURCE_EXHAUSTED).
         * Default 1024; 0: unbounded.
         */
        public Builder defaultMaxQueueSize(int requests) {
            if (requests < 0) {
                throw new IllegalArgumentException("defaultMaxQueueSize " + requests + " is negative");
            }
            defaultMaxQueueSize = requests;
            return this;
        }

        /** The most instances one model version may ask for (default 64); a config above it fails to load. */
        public Builder maxInstancesPerModel(int instances) {
            if (instances <= 0) {
                throw new IllegalArgumentException("maxInstancesPerModel " + instances + " must be positive");
            }
            maxInstancesPerModel = instances;
            return this;
        }

        /** The most instances every loaded version together may have (default 256); a load above it fails. */
        public Builder maxInstancesPerHost(int instances) {
            if (instances <= 0) {
                throw new IllegalArgumentException("maxInstancesPerHost " + instances + " must be positive");
            }
            maxInstancesPerHost = instances;
            return this;
        }

        /**
         * The host-wide response cache (Triton's {@code --cache-config local,size=<bytes>}): at
         * most {@code bytes} bytes of responses, least recently used first out, used by models whose
         * config has {@code response_cache { enable: true }}. Off (0) by default.
         *
         * @throws IllegalArgumentException when {@code bytes} is negative
         */
        public Builder responseCache(long bytes) {
            if (bytes < 0) {
                throw new IllegalArgumentException("response cache size " + bytes + " is negative; give a size in bytes ≥ 0 (0 turns the cache off)");
            }
            responseCacheBytes = bytes;
            return this;
        }

        /**
         * The name the host reports in server metadata (Triton reports {@code triton}); default
         * {@value BackplaneHost#DEFAULT_SERVER_NAME}.
         *
         * @throws IllegalArgumentException when {@code name} is blank
         */
        public Builder serverName(String name) {
            requireNonNull(name, "name is null");
            if (name.isBlank()) {
                throw new IllegalArgumentException("server name '" + name + "' is blank; give the name clients should see, e.g. \"triton\"");
            }
            serverName = name;
            return this;
        }

        private static Duration positive(Duration d, String what) {
            requireNonNull(d, what + " is null");
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException(what + " " + d + " must be positive");
            }
            return d;
        }

        /**
         * Starts the host: discovers backends, loads the initial models.
         *
         * @throws BackplaneException when an explicitly named model fails to load, or discovery
         *     finds a conflict; nothing is left running
         */
        public BackplaneHost build() {
            ModelControlMode mode = controlMode != null ? controlMode : initialModels.isEmpty() ? ModelControlMode.NONE : ModelControlMode.EXPLICIT;
            if (mode != ModelControlMode.EXPLICIT && !initialModels.isEmpty()) {
                throw BackplaneException.invalid("loadModel(" + initialModels + ") needs model control mode EXPLICIT, not " + mode);
            }
            List<BatcherFactory> allBatchers = new ArrayList<>(batchers);
            allBatchers.add(new NoneBatcherFactory());
            allBatchers.add(new DynamicBatcherFactory());
            allBatchers.add(new SequenceBatcherFactory());
            ClassLoader loader = classLoader != null ? classLoader : BackplaneHost.class.getClassLoader();
            HostOptions options = new HostOptions(repositories, backendsDirectories, mode, initialModels, pollInterval, unloadTimeout,
                    restartBackoffMin, restartBackoffMax, backendOptions, backends, allBatchers, codeModels, ticker, listeners, loader, callerRuns,
                    responseCacheBytes,
                    new HostOptions.Limits(memoryBudget > 0 ? memoryBudget : MemoryBudget.defaultLimit(), defaultMaxQueueSize, maxInstancesPerModel,
                            maxInstancesPerHost), builtinWarmup, ownWarmup, allowLinksOutsideRepository,
                    new RateLimiter.Settings(rateLimit == RateLimitMode.EXECUTION_COUNT, rateLimitResources));
            Path work = HostWorkDirectory.create();
            HostRuntime runtime;
            try {
                runtime = Guice.createInjector(Stage.PRODUCTION, new CoreModule(options, work, BackplaneHost::checkCompleted)).getInstance(HostRuntime.class);
            } catch (RuntimeException e) {
                HostWorkDirectory.delete(work);
                Throwable cause = e instanceof com.google.inject.ProvisionException pe && pe.getCause() != null ? pe.getCause() : e;
                throw BackplaneException.wrap(cause, "the Backplane host failed to start");
            }
            BackplaneHost host = new BackplaneHost(runtime, work, serverName, strictReadiness);
            try {
                runtime.start();
            } catch (RuntimeException e) {
                // interrupted (a shutdown cancelled the start): close without interruption, keep the flag for the caller
                boolean interrupted = Thread.interrupted();
                try {
                    host.close();
                } finally {
                    if (interrupted) {
                        Thread.currentThread().interrupt();
                    }
                }
                throw e;
            }
            return host;
        }
    }
}
