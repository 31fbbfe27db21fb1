package io.backplane.testkit;

import static java.util.Objects.requireNonNull;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.ModelConfig;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * One backend serving one model inside the real core: the {@code config.pbtxt} parser, a
 * {@link BackplaneHost}, its scheduler and batchers, its response senders and its lifecycle —
 * the instance harness a backend author writes white-box tests on, instead of a hand-written
 * stand-in for the core.
 *
 * <pre>{@code
 * try (ModelHarness h = ModelHarness.builder(new MyBackendFactory())
 *         .modelFolder(Path.of("src/test/resources/models/add_sub"))   // config.pbtxt + version folder
 *         .backendOption("threads", "2")
 *         .start()) {
 *     InferenceResponse r = h.infer(request);                           // through the real scheduler
 *     MyInstance i = h.instance(MyInstance.class);                      // the backend's own object, for white-box checks
 * }                                                                     // close: unload, then the hygiene check
 * }</pre>
 *
 * <p>Requests go through {@link BackplaneHost#stream} and come back as {@link Reply}s. With
 * {@link Builder#exactBatches()} the harness serves the model with its own batcher, so that
 * {@link #batch} hands exactly the given requests to one {@code execute}; {@link #holdExecute()}
 * holds batches at the door of {@code execute} so a test can cancel, answer, unload or close at a
 * known point. The objects the backend created — its {@code Backend}, {@code Model}s and
 * {@code ModelInstance}s, and the core's contexts for them — are reachable for assertions.
 *
 * <p>{@link #close()} closes the host and then checks what the core promises (L10): no open
 * request, every instance, model and backend closed as often as created, and no thread that started after the
 * harness still alive (the core's, the backend's; see {@link Builder#ignoreThread}). It throws
 * {@link AssertionError} naming what was left. Harnesses open at the same time see each other's
 * threads: close them in the reverse order of their start, and start none while one closes.
 *
 * <p>Thread-safe, except that {@link #batch} must not race other requests to the same model.
 */
public final class ModelHarness implements AutoCloseable {
    private static final Set<String> JDK_THREADS = Set.of("process reaper", "Common-Cleaner", "Attach Listener", "Signal Dispatcher");

    private final BackplaneHost host;
    private final String modelName;
    private final Duration answerTimeout;
    private final Recorder recorder;
    private final HarnessBatcher.@Nullable Factory batchers;
    private final Set<Thread> threadsBefore;
    private final Predicate<Thread> ignoreThread;
    private volatile boolean closed;

    private ModelHarness(BackplaneHost host, String modelName, Duration answerTimeout, Recorder recorder,
            HarnessBatcher.@Nullable Factory batchers, Set<Thread> threadsBefore, Predicate<Thread> ignoreThread) {
        this.host = host;
        this.modelName = modelName;
        this.answerTimeout = answerTimeout;
        this.recorder = recorder;
        this.batchers = batchers;
        this.threadsBefore = threadsBefore;
        this.ignoreThread = ignoreThread;
    }

    /** A harness for the backend that {@code factory} creates; the factory is used for one host. */
    public static Builder builder(BackendFactory factory) {
        return new Builder(factory);
    }

    // ---- requests ----

    /** Sends a request (its model name is this harness's model) and returns at once. */
    public Reply send(InferenceRequest request) {
        checkOpen();
        Reply reply = new Reply(request, answerTimeout);
        reply.handle(host.stream(request, reply.observer()));
        return reply;
    }

    /** Sends a request and waits for its answer: the response, or an error response (see {@link Reply#await()}). */
    public InferenceResponse infer(InferenceRequest request) throws InterruptedException {
        return send(request).await();
    }

    /**
     * Hands exactly these requests, in this order, to one {@code execute} as one batch (needs
     * {@link Builder#exactBatches()}), and returns once the core took that batch; the replies
     * may still be open. Their sizes must fit the model's {@code max_batch_size} (a model that
     * does not batch takes one request per batch). A request the host refuses at once (an
     * invalid input) is answered with its error and left out of the batch. Must not race other
     * requests to the model.
     */
    public List<Reply> batch(InferenceRequest... requests) throws InterruptedException {
        HarnessBatcher.Factory f = batchers;
        if (f == null) {
            throw new IllegalStateException("batch(...) needs the harness's batcher: build the harness with exactBatches()");
        }
        if (requests.length == 0) {
            throw new IllegalArgumentException("batch() needs at least one request");
        }
        HarnessBatcher b = f.current();
        long before = b.expect(requests.length);
        List<Reply> out = new ArrayList<>(requests.length);
        int accepted = 0;
        for (InferenceRequest r : requests) {
            Reply reply = send(r);
            out.add(reply);
            if (reply.id() > 0) {
                accepted++;
            }
        }
        if (accepted == 0) {
            b.retarget(1);
            return out;
        }
        if (accepted < requests.length) {
            b.retarget(accepted); // the host refused some at once (e.g. an invalid input): they never reach the batcher
        }
        if (!b.awaitTaken(before, System.nanoTime() + answerTimeout.toNanos())) {
            throw new AssertionError("the core did not take the batch of " + requests.length + " request(s) within " + answerTimeout.toMillis()
                    + " ms: " + out);
        }
        return out;
    }

    /** Sends every request of a batch through {@link #batch} and waits for each answer. */
    public List<InferenceResponse> run(InferenceRequest... requests) throws InterruptedException {
        List<InferenceResponse> out = new ArrayList<>();
        for (Reply r : batch(requests)) {
            out.add(r.await());
        }
        return out;
    }

    /**
     * Holds every batch at the door of the backend's {@code execute} until the door is opened.
     * One door at a time; close it (or open it) before the next.
     */
    public ExecuteDoor holdExecute() {
        ExecuteDoor d = new ExecuteDoor(answerTimeout);
        if (!recorder.door.compareAndSet(null, d)) {
            throw new IllegalStateException("a door is already held; open it first");
        }
        return d;
    }

    // ---- the model ----

    /** The host the harness runs (EXPLICIT model control: {@link #unload()} and {@link #load()} work). */
    public BackplaneHost host() {
        return host;
    }

    public String modelName() {
        return modelName;
    }

    /** The config the newest loaded version runs with (after auto-complete). */
    public ModelConfig config() {
        return host.modelConfig(modelName, InferenceRequest.LATEST);
    }

    /** Unloads the model (L7): every open request ends; instances and model are closed. */
    public void unload() {
        host.unload(modelName);
    }

    /** Loads the model again (a reload when it is loaded: L9). */
    public void load() {
        host.load(modelName);
    }

    /** Whether the model can serve now (an instance is ready). */
    public boolean isReady() {
        return host.isModelReady(modelName);
    }

    /** Waits until the model can serve (e.g. after an instance restart), or fails at the harness's answer timeout. */
    public void awaitReady() {
        Await.until(this::isReady, answerTimeout, "model '" + modelName + "' to be ready");
    }

    // ---- what the backend created ----

    /** The backend the core created, as the backend's own type. */
    public <T> T backend(Class<T> type) {
        Backend b = recorder.backend.get();
        if (b == null) {
            throw new IllegalStateException("the core has not created the backend");
        }
        return type.cast(b);
    }

    /** The newest open model (loaded version), as the backend's own type. */
    public <T> T model(Class<T> type) {
        synchronized (recorder) {
            if (recorder.openModels.isEmpty()) {
                throw new IllegalStateException("no model of '" + modelName + "' is open");
            }
            return type.cast(recorder.openModels.getLast().delegate);
        }
    }

    /** The core's context of the newest open model. */
    public ModelContext modelContext() {
        synchronized (recorder) {
            if (recorder.openModels.isEmpty()) {
                throw new IllegalStateException("no model of '" + modelName + "' is open");
            }
            return recorder.openModels.getLast().context;
        }
    }

    /** The newest open instance, as the backend's own type. */
    public <T> T instance(Class<T> type) {
        return type.cast(openInstance().delegate);
    }

    /** The core's context of the newest open instance. */
    public InstanceContext instanceContext() {
        return openInstance().context;
    }

    /** Every open instance, oldest first, as the backend's own type. */
    public <T> List<T> instances(Class<T> type) {
        synchronized (recorder) {
            return recorder.openInstances.stream().map(i -> type.cast(i.delegate)).toList();
        }
    }

    /** How many instances the core created so far (replacements included). */
    public int instancesCreated() {
        return recorder.instancesCreated.get();
    }

    private RecordedInstance openInstance() {
        synchronized (recorder) {
            if (recorder.openInstances.isEmpty()) {
                throw new IllegalStateException("no instance of '" + modelName + "' is open");
            }
            return recorder.openInstances.getLast();
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("the harness is closed");
        }
    }

    // ---- close ----

    /**
     * Closes the host (every open request ends, the model unloads within the unload deadline,
     * the backend closes), then checks that nothing is left. Idempotent.
     *
     * @throws AssertionError naming what the backend or the core left behind
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        ExecuteDoor d = recorder.door.getAndSet(null);
        if (d != null) {
            d.open();
        }
        host.close();
        List<String> problems = new ArrayList<>();
        int open = host.openRequests();
        if (open != 0) {
            problems.add(open + " request(s) still open after the host closed");
        }
        Recorder r = recorder;
        if (r.instancesClosed.get() != r.instancesCreated.get()) {
            problems.add(r.instancesClosed.get() + " of " + r.instancesCreated.get() + " instance(s) were closed");
        }
        if (r.modelsClosed.get() != r.modelsLoaded.get()) {
            problems.add(r.modelsClosed.get() + " of " + r.modelsLoaded.get() + " model(s) were closed");
        }
        if (r.backendsClosed.get() != r.backendsCreated.get()) {
            problems.add(r.backendsClosed.get() + " of " + r.backendsCreated.get() + " backend(s) were closed");
        }
        List<String> threads = leftoverThreads();
        if (!threads.isEmpty()) {
            problems.add("thread(s) still alive " + answerTimeout.toMillis() + " ms after the host closed: " + threads);
        }
        if (!problems.isEmpty()) {
            throw new AssertionError("[L10 shutdown] model '" + modelName + "': " + String.join("; ", problems));
        }
    }

    /**
     * Threads that started after this harness did and do not end within the answer timeout: the
     * core's ({@code backplane-*}) and any other but the JDK's, JUnit's and those the builder's
     * {@link Builder#ignoreThread} accepts. Each is joined up to the deadline (a handshake, no polling).
     */
    private List<String> leftoverThreads() {
        long deadline = System.nanoTime() + answerTimeout.toNanos();
        List<String> out = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            String n = t.getName();
            if (threadsBefore.contains(t) || t == Thread.currentThread() || JDK_THREADS.contains(n) || n.startsWith("ForkJoinPool.commonPool")
                    || n.startsWith("junit-") || ignoreThread.test(t)) {
                continue;
            }
            try {
                t.join(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            if (t.isAlive()) {
                out.add(n);
            }
        }
        Collections.sort(out);
        return out;
    }

    // ---- recording what the backend creates ----

    private record RecordedModel(Model delegate, ModelContext context) {
    }

    private record RecordedInstance(ModelInstance delegate, InstanceContext context) {
    }

    /** Wraps the backend at each SPI seam to record the objects it creates and to hold batches at the door. */
    private static final class Recorder {
        final AtomicReference<@Nullable Backend> backend = new AtomicReference<>();
        final AtomicReference<@Nullable ExecuteDoor> door = new AtomicReference<>();
        final List<RecordedModel> openModels = new ArrayList<>();
        final List<RecordedInstance> openInstances = new ArrayList<>();
        final AtomicInteger backendsCreated = new AtomicInteger();
        final AtomicInteger backendsClosed = new AtomicInteger();
        final AtomicInteger modelsLoaded = new AtomicInteger();
        final AtomicInteger modelsClosed = new AtomicInteger();
        final AtomicInteger instancesCreated = new AtomicInteger();
        final AtomicInteger instancesClosed = new AtomicInteger();
        private final String modelName;
        private final ModelFiles files;

        Recorder(String modelName, ModelFiles files) {
            this.modelName = modelName;
            this.files = files;
        }

        BackendFactory wrap(BackendFactory f) {
            ClassLoader loader = ContextLoader.of(f);
            return new BackendFactory() {
                @Override
                public String name() {
                    return f.name();
                }

                @Override
                public Set<String> aliases() {
                    return f.aliases();
                }

                @Override
                public int spiVersion() {
                    return f.spiVersion();
                }

                @Override
                public BackendCapabilities capabilities() {
                    try (var _ = ContextLoader.swap(loader)) {
                        return f.capabilities();
                    }
                }

                @Override
                public Backend create(BackendContext context) throws Exception {
                    try (var _ = ContextLoader.swap(loader)) {
                        Backend b = requireNonNull(f.create(context), "BackendFactory.create returned null");
                        backendsCreated.incrementAndGet();
                        backend.set(b);
                        return wrap(b, loader);
                    }
                }
            };
        }

        private void writeFiles(ModelContext ctx) {
            if (ctx.name().equals(modelName)) {
                files.writeInto(ctx.modelDirectory(), ctx.versionDirectory());
            }
        }

        private Backend wrap(Backend b, ClassLoader loader) {
            return new Backend() {
                @Override
                public ModelConfig autoCompleteConfig(ModelContext context) throws Exception {
                    writeFiles(context);
                    try (var _ = ContextLoader.swap(loader)) {
                        return b.autoCompleteConfig(context);
                    }
                }

                @Override
                public Model loadModel(ModelContext context) throws Exception {
                    writeFiles(context);
                    try (var _ = ContextLoader.swap(loader)) {
                        Model m = requireNonNull(b.loadModel(context), "Backend.loadModel returned null");
                        modelsLoaded.incrementAndGet();
                        RecordedModel rec = new RecordedModel(m, context);
                        synchronized (Recorder.this) {
                            openModels.add(rec);
                        }
                        return wrap(rec, loader);
                    }
                }

                @Override
                public int deviceCount() {
                    try (var _ = ContextLoader.swap(loader)) {
                        return b.deviceCount();
                    }
                }

                @Override
                public void close() {
                    try (var _ = ContextLoader.swap(loader)) {
                        b.close();
                    } finally {
                        backendsClosed.incrementAndGet();
                    }
                }
            };
        }

        private Model wrap(RecordedModel rec, ClassLoader loader) {
            return new Model() {
                @Override
                public ModelInstance createInstance(InstanceContext context) throws Exception {
                    try (var _ = ContextLoader.swap(loader)) {
                        ModelInstance i = requireNonNull(rec.delegate.createInstance(context), "Model.createInstance returned null");
                        instancesCreated.incrementAndGet();
                        RecordedInstance ri = new RecordedInstance(i, context);
                        synchronized (Recorder.this) {
                            openInstances.add(ri);
                        }
                        return wrap(ri, loader);
                    }
                }

                @Override
                public void close() {
                    try (var _ = ContextLoader.swap(loader)) {
                        rec.delegate.close();
                    } finally {
                        modelsClosed.incrementAndGet();
                        synchronized (Recorder.this) {
                            openModels.remove(rec);
                        }
                    }
                }
            };
        }

        private ModelInstance wrap(RecordedInstance rec, ClassLoader loader) {
            return new ModelInstance() {
                @Override
                public void execute(List<ScheduledRequest> batch) throws Exception {
                    ExecuteDoor d = door.get();
                    if (d != null) {
                        d.pass(batch);
                    }
                    try (var _ = ContextLoader.swap(loader)) {
                        rec.delegate.execute(batch);
                    }
                }

                @Override
                public boolean isReady() {
                    return rec.delegate.isReady();
                }

                @Override
                public void close() {
                    try (var _ = ContextLoader.swap(loader)) {
                        rec.delegate.close();
                    } finally {
                        instancesClosed.incrementAndGet();
                        synchronized (Recorder.this) {
                            openInstances.remove(rec);
                        }
                    }
                }
            };
        }
    }

    // ---- builder ----

    /** Builds and starts a {@link ModelHarness}; not thread-safe. */
    public static final class Builder {
        private final BackendFactory factory;
        private @Nullable ModelConfig config;
        private @Nullable String configText;
        private final Map<String, byte[]> versionFiles = new LinkedHashMap<>();
        private final Map<String, byte[]> modelFiles = new LinkedHashMap<>();
        private final List<UnaryOperator<ModelConfig>> mappers = new ArrayList<>();
        private final Map<String, String> options = new LinkedHashMap<>();
        private boolean exactBatches;
        private Duration unloadTimeout = Duration.ofSeconds(10);
        private Duration answerTimeout = Duration.ofSeconds(30);
        private Duration backoffMin = Duration.ofMillis(10);
        private Duration backoffMax = Duration.ofMillis(200);
        private final List<Consumer<BackplaneHost.Builder>> hostSettings = new ArrayList<>();
        private Predicate<Thread> ignoreThread = t -> false;

        private Builder(BackendFactory factory) {
            this.factory = requireNonNull(factory, "factory is null");
        }

        /** The model's config, built in code. */
        public Builder model(ModelConfig config) {
            this.config = requireNonNull(config, "config is null");
            this.configText = null;
            return this;
        }

        /**
         * The model's {@code config.pbtxt} text, parsed by the host's parser when the harness
         * starts (a syntax or validation error fails {@link #start()} with the parser's message).
         */
        public Builder config(String pbtxt) {
            this.configText = requireNonNull(pbtxt, "pbtxt is null");
            this.config = null;
            return this;
        }

        /**
         * A Triton model folder: its {@code config.pbtxt} parsed by the host's parser (or the
         * config the core infers from the model file when there is none), the files of its highest
         * version folder, and the other files of the model folder.
         */
        public Builder modelFolder(Path dir) {
            this.config = ModelConfigParser.parseModelDirectory(dir);
            this.configText = null;
            ModelFiles files = ModelFiles.ofFolder(dir);
            versionFiles.putAll(files.versionFiles());
            modelFiles.putAll(files.modelFiles());
            return this;
        }

        /** Changes the config before the load, e.g. {@code c -> c.toBuilder().maxBatchSize(4).build()}; repeatable. */
        public Builder mapConfig(UnaryOperator<ModelConfig> change) {
            mappers.add(requireNonNull(change, "change is null"));
            return this;
        }

        /** A file of the version folder (e.g. {@code model.py}), written before the backend loads the model. */
        public Builder versionFile(String relativePath, byte[] content) {
            versionFiles.put(ModelFiles.checked(relativePath), content.clone());
            return this;
        }

        public Builder versionFile(String relativePath, String utf8) {
            return versionFile(relativePath, utf8.getBytes(StandardCharsets.UTF_8));
        }

        /** Every file under {@code dir} (recursively) as a version-folder file. */
        public Builder versionFilesFrom(Path dir) {
            versionFiles.putAll(ModelFiles.readTree(dir));
            return this;
        }

        /** A file of the model folder, beside the version folders. */
        public Builder modelFile(String relativePath, byte[] content) {
            modelFiles.put(ModelFiles.checked(relativePath), content.clone());
            return this;
        }

        /** A host-level option of the backend under test ({@code BackendContext.options()}). */
        public Builder backendOption(String key, String value) {
            options.put(requireNonNull(key, "key is null"), requireNonNull(value, "value is null"));
            return this;
        }

        /** Every option of {@code more}, as {@link #backendOption}. */
        public Builder backendOptions(Map<String, String> more) {
            more.forEach(this::backendOption);
            return this;
        }

        /**
         * Serves the model with the harness's own batcher: one request per batch, except for the
         * batches {@link ModelHarness#batch} forms. Without it the model's own batcher runs
         * ({@code dynamic_batching} → the dynamic batcher, else one request per batch).
         */
        public Builder exactBatches() {
            exactBatches = true;
            return this;
        }

        /** The host's unload deadline (L7). Default 10 s. */
        public Builder unloadTimeout(Duration timeout) {
            unloadTimeout = requireNonNull(timeout, "timeout is null");
            return this;
        }

        /** How long the harness waits for an answer, a batch or a handshake before it fails. Default 30 s. */
        public Builder answerTimeout(Duration timeout) {
            answerTimeout = requireNonNull(timeout, "timeout is null");
            return this;
        }

        /** The core's backoff between instance restarts (L8). Default 10 ms to 200 ms, so restart tests run fast. */
        public Builder restartBackoff(Duration min, Duration max) {
            backoffMin = requireNonNull(min, "min is null");
            backoffMax = requireNonNull(max, "max is null");
            return this;
        }

        /**
         * Threads that may outlive the harness (e.g. a JDK-internal pool your backend cannot stop,
         * or a thread of your test that ends later); every other thread started meanwhile must end
         * when the harness closes.
         */
        public Builder ignoreThread(Predicate<Thread> ignore) {
            ignoreThread = requireNonNull(ignore, "ignore is null");
            return this;
        }

        /** Any other host setting (e.g. a listener); the harness sets backend, model, control mode and batcher itself. */
        public Builder configureHost(Consumer<BackplaneHost.Builder> settings) {
            hostSettings.add(requireNonNull(settings, "settings is null"));
            return this;
        }

        /**
         * Starts the host and loads the model.
         *
         * @throws BackplaneException when the config is invalid or the backend fails to load the
         *     model; nothing is left running
         */
        public ModelHarness start() {
            ModelConfig c = config;
            if (configText != null) {
                c = ModelConfigParser.parse(configText, "config.pbtxt", "");
            }
            if (c == null) {
                throw new IllegalStateException("no model: call model(config), config(pbtxt) or modelFolder(dir)");
            }
            for (UnaryOperator<ModelConfig> m : mappers) {
                c = requireNonNull(m.apply(c), "mapConfig returned null");
            }
            HarnessBatcher.Factory batchers = null;
            if (exactBatches) {
                batchers = new HarnessBatcher.Factory();
                c = c.toBuilder().dynamicBatching(null).parameter("batcher", HarnessBatcher.NAME).build();
            }
            Set<Thread> before = Set.copyOf(Thread.getAllStackTraces().keySet());
            Recorder recorder = new Recorder(c.name(), new ModelFiles(modelFiles, versionFiles));
            BackplaneHost.Builder b = BackplaneHost.builder().backend(recorder.wrap(factory)).model(c).modelControlMode(ModelControlMode.EXPLICIT)
                    .loadModel(c.name()).unloadTimeout(unloadTimeout).restartBackoff(backoffMin, backoffMax);
            options.forEach((k, v) -> b.backendOption(factory.name(), k, v));
            if (batchers != null) {
                b.batcher(batchers);
            }
            hostSettings.forEach(s -> s.accept(b));
            BackplaneHost host = b.build();
            return new ModelHarness(host, c.name(), answerTimeout, recorder, batchers, before, ignoreThread);
        }
    }
}
