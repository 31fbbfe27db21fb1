package io.backplane.server;

import static java.util.Objects.requireNonNull;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.RateLimitMode;
import io.backplane.server.Converters.PluginOption;
import io.backplane.spi.host.FrontendFactory;
import io.backplane.spi.host.ModelStatus;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code backplane serve}: builds a {@link BackplaneHost} from Triton-like options, starts every
 * installed frontend whose port is not disabled, logs where each serves, and runs until SIGTERM
 * (or {@link Server#close()}), then closes the frontends and the host within
 * {@code --exit-timeout-secs}.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, sortOptions = false, usageHelpAutoWidth = true,
        description = {"Serves a model repository over the installed frontends (Open Inference Protocol REST and gRPC, OpenAI-compatible API, metrics).",
                "Without --model-repository it serves ./samples/models, or the samples bundled with the distribution."},
        footer = {"", "Exit codes: 0 after a clean stop on SIGTERM or SIGINT, 1 if the server failed, 2 for bad options."})
final class ServeCommand implements Callable<Integer> {
    private static final Logger log = LoggerFactory.getLogger(ServeCommand.class);
    static final Path SAMPLES = Path.of("samples", "models");

    @Spec
    private CommandSpec spec;

    @Option(names = {"--model-repository", "--model-store"}, paramLabel = "<dir>", description = "A model repository in Triton's layout; repeatable (--model-store: Triton's older name).")
    List<Path> modelRepositories = new ArrayList<>();

    @Option(names = "--model-control-mode", paramLabel = "none|explicit|poll",
            description = "none: load every model at start; explicit: load what --load-model names, then on request; poll: like none, then rescan. "
                    + "Default: explicit with --load-model, else none.")
    @Nullable ModelControlMode controlMode;

    @Option(names = "--load-model", paramLabel = "<model>", description = "A model to load at start (explicit mode); repeatable. '*' loads every model of the repository, as Triton's --load-model=*.")
    List<String> loadModels = new ArrayList<>();

    @Option(names = "--allow-links-outside-repository", paramLabel = "<bool>", arity = "0..1", defaultValue = "false", fallbackValue = "true",
            description = "Serve models whose files or folders are symbolic links to places outside the model repository (by default such a"
                    + " model fails to load, naming the link; links that stay inside the repository, as in a Kubernetes ConfigMap mount,"
                    + " are always fine). Also lets default_model_filename, label files, warm-up data and the python backend's"
                    + " EXECUTION_ENV_PATH lead outside (default: ${DEFAULT-VALUE}).")
    boolean allowLinksOutsideRepository;

    @Option(names = "--repository-poll-secs", paramLabel = "<s>", defaultValue = "15", converter = Converters.PositiveSeconds.class,
            description = "How often poll mode rescans the repositories (default: ${DEFAULT-VALUE}).")
    int pollSecs;

    @Option(names = "--http-port", paramLabel = "<port>", defaultValue = "8000", converter = Converters.Port.class,
            description = "Port of the 'http' frontend (default: ${DEFAULT-VALUE}); 0 picks a free one, -1 disables it.")
    int httpPort;

    @Option(names = "--http-max-input-size", paramLabel = "<bytes>",
            description = "Triton's flag: the largest JSON request body, and the largest raw binary input, the 'http' frontend takes, in bytes"
                    + " (the frontend option max_body_bytes; default 67108864); larger ones are answered 400.")
    @Nullable Long httpMaxInputSize;

    @Option(names = "--grpc-port", paramLabel = "<port>", defaultValue = "8001", converter = Converters.Port.class,
            description = "Port of the 'grpc' frontend (default: ${DEFAULT-VALUE}); 0 picks a free one, -1 disables it.")
    int grpcPort;

    @Option(names = "--metrics-port", paramLabel = "<port>", defaultValue = "8002", converter = Converters.Port.class,
            description = "Port of the 'metrics' frontend (default: ${DEFAULT-VALUE}); 0 picks a free one, -1 disables it.")
    int metricsPort;

    @Option(names = "--openai-port", paramLabel = "<port>", defaultValue = "9000", converter = Converters.Port.class,
            description = "Port of the 'openai' frontend, the OpenAI-compatible API (default: ${DEFAULT-VALUE}, Triton's); 0 picks a free one,"
                    + " -1 disables it.")
    int openaiPort;

    @Option(names = "--http-address", paramLabel = "<addr>", defaultValue = "0.0.0.0", description = "Address the 'http' frontend binds (default: ${DEFAULT-VALUE}).")
    String httpAddress = "0.0.0.0";

    @Option(names = "--grpc-address", paramLabel = "<addr>", defaultValue = "0.0.0.0", description = "Address the 'grpc' frontend binds (default: ${DEFAULT-VALUE}).")
    String grpcAddress = "0.0.0.0";

    @Option(names = "--metrics-address", paramLabel = "<addr>", defaultValue = "0.0.0.0", description = "Address the 'metrics' frontend binds (default: ${DEFAULT-VALUE}).")
    String metricsAddress = "0.0.0.0";

    @Option(names = "--openai-address", paramLabel = "<addr>", defaultValue = "0.0.0.0", description = "Address the 'openai' frontend binds (default: ${DEFAULT-VALUE}).")
    String openaiAddress = "0.0.0.0";

    @Option(names = "--openai-api-key", paramLabel = "<key>", defaultValue = "${env:BACKPLANE_OPENAI_API_KEY}",
            description = "Clients of the 'openai' frontend must send Authorization: Bearer <key> (default: the environment variable "
                    + "BACKPLANE_OPENAI_API_KEY, which keeps the key off the command line; else no key asked).")
    @Nullable String openaiApiKey;

    @Option(names = "--openai-restricted-api", paramLabel = "<api>[,<api>...]:<header>=<value>",
            description = "'openai' frontend API groups that need a header (as --http-restricted-api); repeatable. Groups: inference "
                    + "(completions, chat, embeddings), model-repository (/v1/models), health (/health/ready).")
    List<String> openaiRestrictedApi = new ArrayList<>();

    @Option(names = "--allow-http", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Start the 'http' frontend (default: ${DEFAULT-VALUE}).")
    boolean allowHttp;

    @Option(names = "--allow-grpc", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Start the 'grpc' frontend (default: ${DEFAULT-VALUE}).")
    boolean allowGrpc;

    @Option(names = "--allow-openai", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Start the 'openai' frontend (default: ${DEFAULT-VALUE}).")
    boolean allowOpenai;

    @Option(names = "--allow-metrics", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Start the 'metrics' frontend (default: ${DEFAULT-VALUE}).")
    boolean allowMetrics;

    @Option(names = "--strict-readiness", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Report the server ready (/v2/health/ready, gRPC ServerReady) only while every model it was asked to serve is ready "
                    + "(default: ${DEFAULT-VALUE}); false: ready whenever it is running.")
    boolean strictReadiness = true;

    @Option(names = "--server-name", paramLabel = "<name>", defaultValue = BackplaneHost.DEFAULT_SERVER_NAME,
            description = "The name the server reports in its metadata (REST GET /v2, gRPC ServerMetadata), for clients and dashboards that "
                    + "look for a name; Triton reports 'triton' (default: ${DEFAULT-VALUE}).")
    String serverName = BackplaneHost.DEFAULT_SERVER_NAME;

    @Option(names = "--frontend-config", paramLabel = "<frontend>,<key>=<value>", converter = Converters.PluginSetting.class,
            description = "An option for one frontend, e.g. http,port=9090; port=-1 disables it; repeatable.")
    List<PluginOption> frontendConfig = new ArrayList<>();

    @Option(names = "--backend-directory", paramLabel = "<dir>",
            description = "A folder with one sub-folder of jars per backend or plugin, each loaded in its own class loader; repeatable. "
                    + "Adds to the backends bundled with the distribution (<distribution>/backends).")
    List<Path> backendDirectories = new ArrayList<>();

    @Option(names = "--bundled-backends", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Load the backends bundled with the distribution (default: ${DEFAULT-VALUE}); false serves only --backend-directory's.")
    boolean bundledBackends = true;

    @Option(names = "--backend-config", paramLabel = "<backend>,<key>=<value>", converter = Converters.PluginSetting.class,
            description = "An option for one backend (under its name or an alias), e.g. python,shm_initial_bytes=1048576; repeatable.")
    List<PluginOption> backendConfig = new ArrayList<>();

    @Option(names = "--http-restricted-api", paramLabel = "<api>[,<api>...]:<header>=<value>",
            description = "REST API groups that need a header, e.g. model-repository,model-config:admin-key=secret; repeatable. "
                    + "Groups: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging.")
    List<String> httpRestrictedApi = new ArrayList<>();

    @Option(names = "--grpc-restricted-protocol", paramLabel = "<api>[,<api>...]:<header>=<value>",
            description = "gRPC API groups that need a header (as --http-restricted-api); repeatable.")
    List<String> grpcRestrictedProtocol = new ArrayList<>();

    @Option(names = "--grpc-use-ssl", paramLabel = "<bool>", arity = "0..1", defaultValue = "false", fallbackValue = "true",
            description = "Serve gRPC over TLS with --grpc-server-cert and --grpc-server-key (default: ${DEFAULT-VALUE}).")
    boolean grpcUseSsl;

    @Option(names = "--grpc-use-ssl-mutual", paramLabel = "<bool>", arity = "0..1", defaultValue = "false", fallbackValue = "true",
            description = "Serve gRPC over mutual TLS: clients present a certificate signed by --grpc-root-cert (default: ${DEFAULT-VALUE}).")
    boolean grpcUseSslMutual;

    @Option(names = "--grpc-server-cert", paramLabel = "<file>", description = "PEM certificate chain of the gRPC server.")
    @Nullable String grpcServerCert;

    @Option(names = "--grpc-server-key", paramLabel = "<file>", description = "PEM PKCS#8 private key of the gRPC server.")
    @Nullable String grpcServerKey;

    @Option(names = "--grpc-root-cert", paramLabel = "<file>", description = "PEM certificates of the CAs that sign client certificates (mTLS).")
    @Nullable String grpcRootCert;

    @Option(names = "--grpc-keepalive-time", paramLabel = "<ms>", description = "The server pings a connection silent this long (default 7200000).")
    @Nullable Long grpcKeepaliveTime;

    @Option(names = "--grpc-keepalive-timeout", paramLabel = "<ms>", description = "A ping not acknowledged within this closes the connection (default 20000).")
    @Nullable Long grpcKeepaliveTimeout;

    @Option(names = "--grpc-keepalive-permit-without-calls", paramLabel = "<bool>", arity = "0..1", fallbackValue = "true",
            description = "Whether clients may ping with no call open (default false).")
    @Nullable Boolean grpcKeepalivePermitWithoutCalls;

    @Option(names = "--grpc-http2-min-recv-ping-interval-without-data", paramLabel = "<ms>",
            description = "Clients pinging more often than this are disconnected (default 300000).")
    @Nullable Long grpcMinRecvPingInterval;

    @Option(names = "--cache-config", paramLabel = "local,size=<bytes>", converter = Converters.PluginSetting.class,
            description = "The host-wide response cache, Triton's syntax: local,size=<bytes>. Models use it with response_cache { enable: true }.")
    List<PluginOption> cacheConfig = new ArrayList<>();

    @Option(names = "--exit-timeout-secs", paramLabel = "<s>", defaultValue = "30", converter = Converters.Seconds.class,
            description = "On shutdown, one deadline for every frontend and the host: requests still open then are answered 503 (REST) "
                    + "or UNAVAILABLE/CANCELLED (gRPC) (default: ${DEFAULT-VALUE}).")
    int exitTimeoutSecs;

    @Option(names = "--drain-delay-secs", paramLabel = "<s>", defaultValue = "0", converter = Converters.Seconds.class,
            description = "On SIGTERM, first answer readiness false (/v2/health/ready 503, gRPC ServerReady false) while still serving "
                    + "every request for this long, so a balancer that checks readiness stops sending; then stop as --exit-timeout-secs "
                    + "says. The orchestrator's grace period must cover both (default: ${DEFAULT-VALUE}: refuse at once).")
    int drainDelaySecs;

    @Option(names = "--memory-budget-bytes", paramLabel = "<bytes>", converter = Converters.Bytes.class,
            description = "Bytes that requests read by the frontends may hold at once; a request that does not fit is refused at once "
                    + "(HTTP 503, gRPC RESOURCE_EXHAUSTED) before its body is read (default: a quarter of the smaller of the heap and "
                    + "direct-memory limits).")
    @Nullable Long memoryBudgetBytes;

    @Option(names = "--default-max-queue-size", paramLabel = "<n>", defaultValue = "1024", converter = Converters.Count.class,
            description = "Requests a model may queue when its config sets no max_queue_size; 0: unbounded (default: ${DEFAULT-VALUE}).")
    int defaultMaxQueueSize;

    @Option(names = "--builtin-warmup", paramLabel = "<bool>", arity = "0..1", defaultValue = "true", fallbackValue = "true",
            description = "Before a model without model_warmup reports ready, send it a few requests of zeros shaped from its config, for at most 2 s,"
                    + " only where its backend declares its execute free of side effects (ONNX Runtime does; a Python model.py cannot): no model"
                    + " with user code receives a request it did not ask for. They reach no statistics, metrics or cache; a model's parameter"
                    + " builtin_warmup (true, false or a count) opts in or out (default: ${DEFAULT-VALUE}).")
    boolean builtinWarmup;

    @Option(names = "--own-warmup-ms", paramLabel = "<ms>", defaultValue = "1000", converter = Converters.Count.class,
            description = "Before ready, warm the request path that every model of a backend shares with a model of the backend's own (the Python"
                    + " backend ships one), for this long; no user model receives a request, and nothing reaches statistics or metrics. 0: off"
                    + " (default: ${DEFAULT-VALUE}).")
    int ownWarmupMillis;

    @Option(names = "--max-instances-per-model", paramLabel = "<n>", defaultValue = "64", converter = Converters.PositiveCount.class,
            description = "Instances one model may ask for (instance_group count); a config above it fails to load (default: ${DEFAULT-VALUE}).")
    int maxInstancesPerModel;

    @Option(names = "--max-instances-per-host", paramLabel = "<n>", defaultValue = "256", converter = Converters.PositiveCount.class,
            description = "Instances all loaded models together may have; a load above it fails (default: ${DEFAULT-VALUE}).")
    int maxInstancesPerHost;
    @Option(names = "--rate-limit", paramLabel = "<mode>", defaultValue = "off",
            description = "Triton's rate limiter: execution_count or off (default: ${DEFAULT-VALUE}, Triton's). With execution_count an instance whose"
                    + " instance_group has a rate_limiter executes only when the resources it lists are free, and waiting instances are chosen"
                    + " by execution count times priority; off ignores every rate_limiter.")
    String rateLimit = "off";

    @Option(names = "--rate-limit-resource", paramLabel = "<name>:<count>[:<device>]",
            description = "Triton's syntax (repeatable): the copies of a rate-limiter resource, on one GPU device or, without <device>, on every"
                    + " device (CPU instances count as device 0); for a resource the models declare global, the largest count given. Without"
                    + " it a resource has as many copies as the most any loaded instance asks for.")
    List<String> rateLimitResource = new ArrayList<>();

    @Option(names = "--trace-config", paramLabel = "[<mode>,]<setting>=<value>",
            description = "Trace extension, Triton's syntax (repeatable): level=OFF|TIMESTAMPS, rate=<N> (one request in N), count=<N> (-1: no bound), "
                    + "mode=opentelemetry; opentelemetry,url=<OTLP/HTTP endpoint> (default http://localhost:4318/v1/traces), "
                    + "opentelemetry,exporter=otlp|logging. Off (level=OFF) unless set here or through /v2/trace/setting.")
    List<String> traceConfig = new ArrayList<>();

    @Option(names = "--log-verbose", paramLabel = "<level>", arity = "0..1", defaultValue = "0", fallbackValue = "1",
            description = "1 (or no value): io.backplane logs at DEBUG; 2 and more: TRACE.")
    int logVerbose;

    @Option(names = "--log-level", paramLabel = "<logger>=<level>",
            description = "A logger's level (repeatable), e.g. com.example.mybackend=INFO: a plugin's own lines, which the default "
                    + "configuration keeps at WARN (it logs io.backplane at INFO). Levels: TRACE, DEBUG, INFO, WARN, ERROR, OFF.")
    List<String> logLevel = new ArrayList<>();

    private final Path workingDirectory;
    private final @Nullable Path home;
    private final UnaryOperator<BackplaneHost.Builder> customize;
    private final Consumer<? super Server> onStarted;

    ServeCommand(Path workingDirectory, @Nullable Path home, UnaryOperator<BackplaneHost.Builder> customize, Consumer<? super Server> onStarted) {
        this.workingDirectory = requireNonNull(workingDirectory, "workingDirectory is null");
        this.home = home;
        this.customize = requireNonNull(customize, "customize is null");
        this.onStarted = requireNonNull(onStarted, "onStarted is null");
    }

    @Override
    public Integer call() {
        List<Path> repositories = repositories();
        List<Path> backends = backendsDirectories();
        ModelControlMode mode = controlMode();
        builtinOptions("grpc"); // bad TLS flags fail here, before anything starts
        cacheBytes(); // and bad cache flags
        rateLimiter(BackplaneHost.builder()); // and bad rate-limiter flags
        Map<String, String> levels = logLevels(); // refused before anything logs at the new levels
        try (LogLevels.Restore _ = LogLevels.verbose("io.backplane", logVerbose);
                LogLevels.Restore _ = LogLevels.levels(levels)) {
            return serve(repositories, backends, mode);
        }
    }

    /** {@code --rate-limit} and {@code --rate-limit-resource}, Triton's syntax, refused with the flag's format when wrong. */
    private void rateLimiter(BackplaneHost.Builder builder) {
        try {
            builder.rateLimit(RateLimitMode.parse(rateLimit));
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), "--rate-limit '" + rateLimit + "': give execution_count or off (the default)");
        }
        for (String r : rateLimitResource) {
            String[] parts = r.split(":", -1);
            String format = "--rate-limit-resource '" + r + "': the format is <name>:<count> or <name>:<count>:<device>, e.g. R1:4 or R1:4:0";
            if (parts.length < 2 || parts.length > 3 || parts[0].isBlank()) {
                throw new ParameterException(spec.commandLine(), format);
            }
            if (!parts[0].equals(parts[0].strip())) {
                throw new ParameterException(spec.commandLine(), "--rate-limit-resource '" + r + "': the resource name '" + parts[0]
                        + "' has spaces around it; write it without them, exactly as the models' rate_limiter resources name it (names are case-sensitive)");
            }
            int count;
            int device;
            try {
                count = Integer.parseInt(parts[1].strip());
                device = parts.length == 3 ? Integer.parseInt(parts[2].strip()) : -1;
            } catch (NumberFormatException e) {
                throw new ParameterException(spec.commandLine(), format + " (count and device are whole numbers)");
            }
            if (count < 0 || (parts.length == 3 && device < 0)) {
                throw new ParameterException(spec.commandLine(), format + "; count and device are 0 or more");
            }
            if (parts.length == 3) {
                builder.rateLimitResource(parts[0], count, device);
            } else {
                builder.rateLimitResource(parts[0], count);
            }
        }
    }

    private Map<String, String> logLevels() {
        Map<String, String> levels = new LinkedHashMap<>();
        for (String setting : logLevel) {
            int eq = setting.indexOf('=');
            String logger = eq < 0 ? "" : setting.substring(0, eq).strip();
            String level = eq < 0 ? "" : setting.substring(eq + 1).strip().toUpperCase(Locale.ROOT);
            if (logger.isEmpty() || !LogLevels.LEVELS.contains(level)) {
                throw new ParameterException(spec.commandLine(), "--log-level '" + setting + "': give <logger>=<level>, e.g. "
                        + "com.example.mybackend=INFO (the logger is a package or class name); levels: " + String.join(", ", LogLevels.LEVELS));
            }
            levels.put(logger, level);
        }
        return levels;
    }

    private int serve(List<Path> repositories, List<Path> backends, ModelControlMode mode) {
        long t0 = System.nanoTime();
        BackplaneHost.Builder builder = BackplaneHost.builder()
                .modelControlMode(mode)
                .pollInterval(Duration.ofSeconds(pollSecs))
                .unloadTimeout(exitTimeoutSecs == 0 ? Duration.ofMillis(1) : Duration.ofSeconds(exitTimeoutSecs));
        builder.strictReadiness(strictReadiness);
        if (serverName.isBlank()) {
            throw new ParameterException(spec.commandLine(), "--server-name '" + serverName + "' is blank; give the name clients should see,"
                    + " e.g. --server-name triton");
        }
        builder.serverName(serverName);
        builder.defaultMaxQueueSize(defaultMaxQueueSize).maxInstancesPerModel(maxInstancesPerModel).maxInstancesPerHost(maxInstancesPerHost)
                .builtinWarmup(builtinWarmup).allowLinksOutsideRepository(allowLinksOutsideRepository);
        if (allowLinksOutsideRepository) {
            log.info("--allow-links-outside-repository: models may be served from files outside the model repositories through links");
        }
        if (ownWarmupMillis > 60_000) {
            throw new ParameterException(spec.commandLine(), "--own-warmup-ms " + ownWarmupMillis + " is over a minute; give 0 (off) to 60000");
        }
        builder.ownWarmup(Duration.ofMillis(ownWarmupMillis));
        rateLimiter(builder); // the host logs its rate limiter's mode and resources
        if (memoryBudgetBytes != null) {
            builder.memoryBudget(memoryBudgetBytes);
        }
        repositories.forEach(builder::modelRepository);
        loadModels.forEach(builder::loadModel);
        backends.forEach(builder::backendsDirectory);
        for (PluginOption o : backendConfig) {
            builder.backendOption(o.name(), o.key(), o.value());
        }
        long cacheBytes = cacheBytes();
        if (cacheBytes > 0) {
            builder.responseCache(cacheBytes);
            log.info("response cache: local, {} bytes", cacheBytes);
        }
        log.info("Backplane {} starting: model repositories {}, model control mode {}, backends directories {}", BackplaneHost.VERSION, repositories,
                mode.name().toLowerCase(Locale.ROOT), backends.isEmpty() ? "(none)" : backends);
        if (ignoresSigint()) {
            // The JVM keeps a SIGINT that was ignored when it started ignored (so does every program): a
            // background job of a script (cmd &) starts that way, and Ctrl-C then cannot stop it.
            log.info("SIGINT is ignored by this process (it was started with it ignored, e.g. as a background job of a script): "
                    + "Ctrl-C does not stop the server; SIGTERM does");
        }
        // The hook is in place before anything starts: a SIGTERM while models load cancels those
        // loads (the start then fails and closes what it started) and exits 0 once that is done.
        CountDownLatch startupDone = new CountDownLatch(1);
        AtomicReference<@Nullable Server> running = new AtomicReference<>();
        Thread starter = Thread.currentThread();
        Thread hook = Thread.ofPlatform().name("backplane-shutdown").unstarted(() -> {
            try {
                boolean cancelledStart = startupDone.getCount() > 0;
                if (cancelledStart) {
                    // models still load: cancel their loads (a stub starting is stopped), so the start fails fast and cleans up
                    log.info("shutdown requested while starting: cancelling the loads in progress");
                    starter.interrupt();
                }
                if (!startupDone.await(exitTimeoutSecs + 10L, TimeUnit.SECONDS)) {
                    log.warn("shutdown requested while still starting after {} s; exiting without draining", exitTimeoutSecs + 10L);
                    return;
                }
                Server s = running.get();
                if (s == null && cancelledStart) {
                    log.info("start cancelled by the shutdown; everything it started is closed");
                    haltAfterCleanUp(0);
                }
                if (s != null) {
                    if (drainDelaySecs > 0) {
                        log.info("shutdown requested: readiness is false from now on; serving on for {} s (--drain-delay-secs) so that "
                                + "balancers stop sending, then stopping", drainDelaySecs);
                        s.host().announceShutdown();
                        Thread.sleep(TimeUnit.SECONDS.toMillis(drainDelaySecs));
                    }
                    // a signal asked for this stop and it went cleanly: exit 0 rather than 128 + signal
                    haltAfterCleanUp(closeWithin(s, Duration.ofSeconds(exitTimeoutSecs).plus(Server.CLOSE_GRACE)) ? 0 : 1);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                JvmTemporaryFolder.removeClaimed(); // the JVM exits after this hook: nothing uses the folder any more
            }
        });
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            Server server;
            try {
                OtelTracer tracer = OtelTracer.fromConfig(traceConfig); // a bad --trace-config fails here, before anything starts
                BackplaneHost host;
                try {
                    host = requireNonNull(customize.apply(builder), "customize returned null").build();
                } catch (RuntimeException | Error e) {
                    tracer.close();
                    throw e;
                }
                server = Server.start(host, frontends(host.frontendFactories()), tracer); // closes the tracer when it fails or closes
                running.set(server);
            } finally {
                startupDone.countDown();
            }
            try {
                logStarted(server, t0);
                onStarted.accept(server);
                server.awaitClosed();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                server.close();
            } catch (RuntimeException | Error e) {
                server.close();
                throw e;
            }
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException e) {
                // the JVM is shutting down (SIGTERM): the hook is running or has run
            }
        }
        return 0;
    }

    /**
     * Closes {@code s} on a thread of its own and waits at most {@code limit}: the shutdown is
     * bounded whatever a frontend or a plugin does. False (with the stuck thread's stack in the log)
     * when the close did not finish.
     */
    private static boolean closeWithin(Server s, Duration limit) throws InterruptedException {
        Thread closer = Thread.ofPlatform().daemon().name("backplane-close").start(s::close);
        if (closer.join(limit)) {
            return true;
        }
        StringBuilder stack = new StringBuilder();
        for (StackTraceElement e : closer.getStackTrace()) {
            stack.append("\n\tat ").append(e);
        }
        log.error("the server did not close within {} (--exit-timeout-secs and {} for the models' and frontends' own clean-up); "
                + "exiting with code 1 without it. The close was at:{}", limit, Server.CLOSE_GRACE, stack);
        return false;
    }

    /**
     * Removes the JVM's private temporary folder, then halts with {@code code}. Halting from the
     * shutdown hook is what turns a signal's exit status (128 + signal) into {@code code}; it skips
     * the JVM's delete-on-exit, whose files are in that folder when bin/backplane started the JVM.
     */
    private static void haltAfterCleanUp(int code) {
        JvmTemporaryFolder.removeClaimed();
        Runtime.getRuntime().halt(code);
    }

    /** Whether this process ignores SIGINT (Linux: its SigIgn mask), as one started in the background of a script does. */
    static boolean ignoresSigint() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("SigIgn:")) {
                    return (Long.parseUnsignedLong(line.substring(7).trim(), 16) & (1L << 1)) != 0; // bit n-1 for signal n; SIGINT is 2
                }
            }
        } catch (java.io.IOException | RuntimeException e) {
            log.trace("cannot read /proc/self/status", e);
        }
        return false;
    }

    /** The {@code --cache-config local,size=<bytes>} size, 0 when not given. */
    long cacheBytes() {
        long size = 0;
        for (PluginOption o : cacheConfig) {
            if (!o.name().equals("local")) {
                throw new ParameterException(spec.commandLine(), "--cache-config " + o.name() + "," + o.key() + "=" + o.value()
                        + ": only the 'local' cache exists in Backplane (Triton's redis cache does not); use --cache-config local,size=<bytes>");
            }
            if (!o.key().equals("size")) {
                throw new ParameterException(spec.commandLine(), "--cache-config local," + o.key() + "=" + o.value()
                        + ": the local cache takes only size=<bytes>");
            }
            try {
                size = Long.parseLong(o.value().strip());
            } catch (NumberFormatException e) {
                size = -1;
            }
            if (size < 0) {
                throw new ParameterException(spec.commandLine(), "--cache-config local,size=" + o.value()
                        + ": size must be a whole number of bytes ≥ 0 (e.g. local,size=1048576)");
            }
        }
        return size;
    }

    private static void logStarted(Server server, long t0) {
        List<String> models = new ArrayList<>();
        for (ModelStatus s : server.host().repositoryIndex()) {
            models.add(s.name() + (s.version() > 0 ? " v" + s.version() : "") + " " + s.state() + (s.reason() == null || s.reason().isEmpty() ? "" : " (" + s.reason() + ")"));
        }
        log.info("models: {}", models.isEmpty() ? "none" : String.join(", ", models));
        Map<String, String> endpoints = server.endpoints();
        log.info("Backplane {} started in {} ms; endpoints: {}", BackplaneHost.VERSION, (System.nanoTime() - t0) / 1_000_000,
                endpoints.isEmpty() ? "none" : endpoints);
    }

    // ---- options to host and frontend settings ----

    private List<Path> repositories() {
        if (!modelRepositories.isEmpty()) {
            List<Path> out = new ArrayList<>();
            for (Path p : modelRepositories) {
                Path abs = workingDirectory.resolve(p).normalize();
                if (!Files.isDirectory(abs)) {
                    throw new ParameterException(spec.commandLine(), "Invalid value for option '--model-repository': '" + p + "' is not a directory");
                }
                out.add(abs);
            }
            return out;
        }
        Path local = workingDirectory.resolve(SAMPLES);
        if (Files.isDirectory(local)) {
            return List.of(local);
        }
        if (home != null && Files.isDirectory(home.resolve(SAMPLES))) {
            return List.of(home.resolve(SAMPLES));
        }
        throw new ParameterException(spec.commandLine(), "Missing option '--model-repository': there is no " + SAMPLES + " in " + workingDirectory
                + (home == null ? "" : " nor in " + home) + " to serve by default");
    }

    /** The bundled backends (unless --bundled-backends=false), then each --backend-directory. */
    private List<Path> backendsDirectories() {
        List<Path> out = new ArrayList<>();
        if (bundledBackends && home != null && Files.isDirectory(home.resolve("backends"))) {
            out.add(home.resolve("backends").normalize());
        }
        for (Path p : backendDirectories) {
            Path abs = workingDirectory.resolve(p).normalize();
            if (!Files.isDirectory(abs)) {
                throw new ParameterException(spec.commandLine(), "Invalid value for option '--backend-directory': '" + p + "' is not a directory");
            }
            if (!out.contains(abs)) {
                out.add(abs);
            }
        }
        return out;
    }

    private ModelControlMode controlMode() {
        if (controlMode == null) {
            return loadModels.isEmpty() ? ModelControlMode.NONE : ModelControlMode.EXPLICIT;
        }
        if (controlMode != ModelControlMode.EXPLICIT && !loadModels.isEmpty()) {
            throw new ParameterException(spec.commandLine(), "Option '--load-model' needs '--model-control-mode explicit', not '"
                    + controlMode.name().toLowerCase(Locale.ROOT) + "' (in that mode every model in the repository is loaded)");
        }
        return controlMode;
    }

    private record Builtin(int port, String address, boolean allowed, String flag) {
    }

    /** Options the serve flags give the built-in REST and gRPC frontends (--frontend-config overrides them). */
    private Map<String, String> builtinOptions(String name) {
        Map<String, String> o = new LinkedHashMap<>();
        String drain = Long.toString(exitTimeoutSecs * 1000L);
        switch (name) {
            case "http" -> {
                o.put("drain_timeout_ms", drain);
                putIf(o, "max_body_bytes", httpMaxInputSize);
                if (!httpRestrictedApi.isEmpty()) {
                    o.put("restricted_api", String.join(";", httpRestrictedApi));
                }
            }
            case "openai" -> {
                o.put("drain_timeout_ms", drain);
                if (!openaiRestrictedApi.isEmpty()) {
                    o.put("restricted_api", String.join(";", openaiRestrictedApi));
                }
                putIf(o, "api_key", openaiApiKey);
            }
            case "grpc" -> {
                o.put("drain_timeout_ms", drain);
                if (!grpcRestrictedProtocol.isEmpty()) {
                    o.put("restricted_protocol", String.join(";", grpcRestrictedProtocol));
                }
                if (grpcUseSsl || grpcUseSslMutual) {
                    if (grpcServerCert == null || grpcServerKey == null) {
                        throw new ParameterException(spec.commandLine(), "--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key");
                    }
                    o.put("ssl_cert", grpcServerCert);
                    o.put("ssl_key", grpcServerKey);
                    if (grpcRootCert != null) {
                        o.put("ssl_root_cert", grpcRootCert);
                    }
                    o.put("ssl_mutual", Boolean.toString(grpcUseSslMutual));
                }
                putIf(o, "keepalive_time_ms", grpcKeepaliveTime);
                putIf(o, "keepalive_timeout_ms", grpcKeepaliveTimeout);
                putIf(o, "permit_keepalive_without_calls", grpcKeepalivePermitWithoutCalls);
                putIf(o, "permit_keepalive_time_ms", grpcMinRecvPingInterval);
            }
            default -> {
            }
        }
        return o;
    }

    private static void putIf(Map<String, String> o, String key, @Nullable Object value) {
        if (value != null) {
            o.put(key, value.toString());
        }
    }

    /** The frontends to start, with their options; a frontend with port -1 (or not allowed) is left out. */
    List<Server.FrontendSpec> frontends(Map<String, FrontendFactory> installed) {
        Map<String, Builtin> builtins = Map.of(
                "http", new Builtin(httpPort, httpAddress, allowHttp, "http"),
                "grpc", new Builtin(grpcPort, grpcAddress, allowGrpc, "grpc"),
                "metrics", new Builtin(metricsPort, metricsAddress, allowMetrics, "metrics"),
                "openai", new Builtin(openaiPort, openaiAddress, allowOpenai, "openai"));
        Map<String, Map<String, String>> extra = new LinkedHashMap<>();
        for (PluginOption o : frontendConfig) {
            extra.computeIfAbsent(o.name(), n -> new LinkedHashMap<>()).put(o.key(), o.value());
        }
        for (String name : extra.keySet()) {
            if (!installed.containsKey(name)) {
                log.warn("--frontend-config names frontend '{}', which is not installed; installed frontends: {}", name, installed.keySet());
            }
        }
        if (installed.isEmpty()) {
            log.warn("no frontend is installed: nothing will serve requests. Frontends are FrontendFactory plugins in lib/ or in the backends directory");
        }
        for (String name : List.of("http", "grpc", "metrics", "openai")) {
            if (!installed.containsKey(name)) {
                log.info("no '{}' frontend is installed; its options are ignored", name);
            }
        }
        List<Server.FrontendSpec> out = new ArrayList<>();
        for (Map.Entry<String, FrontendFactory> e : installed.entrySet()) {
            String name = e.getKey();
            Map<String, String> options = new LinkedHashMap<>();
            Builtin b = builtins.get(name);
            if (b != null) {
                if (!b.allowed()) {
                    log.info("frontend '{}' is disabled by --allow-{}=false", name, b.flag());
                    continue;
                }
                options.put("port", Integer.toString(b.port()));
                options.put("host", b.address());
            }
            options.putAll(builtinOptions(name));
            options.putAll(extra.getOrDefault(name, Map.of()));
            if ("-1".equals(options.get("port"))) {
                log.info("frontend '{}' is disabled (port -1)", name);
                continue;
            }
            out.add(new Server.FrontendSpec(name, e.getValue(), options));
        }
        return out;
    }
}
