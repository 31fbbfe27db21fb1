package io.backplane.testkit;

import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.PluginDirectory;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongFunction;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Assumptions;

/**
 * The harness behind {@link BackendConformanceTest}: one per test instance, it starts the kit's
 * host around the backend ({@link Probe} wraps it, {@link GateBatcher} forms batches, a
 * {@link Gate} holds them at the door of execute), sends the kit's requests ({@link Call}),
 * records violations (the probe's {@link Ledger}, or its own list before a host exists) and, after
 * each test, closes the host and checks that nothing is left (L10). The checks themselves, one
 * test method each, stay in {@link BackendConformanceTest}, which is all a backend author sees;
 * this class is what they share, so each check reads as the scenario it runs.
 *
 * <p>Owns: one report per violation (a violation is reported by the first
 * {@link #assertNoViolations} or {@link #tearDown} after it, never twice), the hygiene check
 * after close (instances, models and backends closed as often as created; no {@code backplane-*}
 * or {@code kit-*} thread and no other thread started during the test still alive after a 5 s
 * handshake), and that every request the kit sends carries its tag as its id. Used from the test
 * thread, and from the kit's own caller threads for {@link #send} and {@link #violation}.
 */
final class ConformanceRun {
    /** What the backend author's subclass provides, read when the harness needs it. */
    interface Hooks {
        BackendFactory backend();

        @Nullable Path pluginDirectory();

        Duration unloadTimeout();

        Duration answerTimeout();

        void configureHost(BackplaneHost.Builder builder);

        boolean ignoreLeftoverThread(Thread thread);
    }

    private static final Set<String> JDK_THREADS = Set.of("process reaper", "Common-Cleaner", "Attach Listener", "Signal Dispatcher");

    private final Hooks hooks;
    private @Nullable PluginDirectory plugin;
    private @Nullable Probe probe;
    private @Nullable BackplaneHost host;
    private Set<Thread> threadsBefore = Set.of();
    private ConformanceModel conformance = ConformanceModel.placeholder();
    private Set<Capability> caps = Set.of();
    private String backendName = "";
    private int reported;
    private int gateBatch = 1;
    private final List<String> kitViolations = new CopyOnWriteArrayList<>();
    private final AtomicLong tags = new AtomicLong();

    ConformanceRun(Hooks hooks) {
        this.hooks = java.util.Objects.requireNonNull(hooks, "hooks is null");
    }

    ConformanceModel conformance() {
        return conformance;
    }

    /** The declared capabilities' closure. */
    Set<Capability> caps() {
        return caps;
    }

    String backendName() {
        return backendName;
    }


    /** Before each test: what the backend author declared, read once per test. */
    void setUp(Supplier<ConformanceModel> model, Supplier<Set<Capability>> declared) {
        threadsBefore = Set.copyOf(Thread.getAllStackTraces().keySet());
        conformance = java.util.Objects.requireNonNull(model.get(), "model() returned null");
        caps = Collections.unmodifiableSet(Capability.closure(java.util.Objects.requireNonNull(declared.get(), "capabilities() returned null")));
        BackendFactory f = hooks.backend();
        backendName = f.name();
        Path dir = hooks.pluginDirectory();
        if (dir != null) {
            try {
                plugin = pluginLoader(dir);
            } catch (BackplaneException e) {
                fail(e.getMessage());
            }
            factory(); // fails now, with what the directory holds, when the backend is not there
        }
    }

    /**
     * The packaged plugin directories this JVM opened, one class loader each, kept for the JVM's
     * life as a server keeps each folder of its backends directory for the process's: a JNI library
     * binds to the first class loader that loads it, and the JVM refuses it to a second loader of the
     * same directory ("already loaded in another classloader") until the first is collected, so a
     * backend with native code (libtorch, xgboost4j) could not start again in the next test's loader.
     * Each test still gets fresh factories, backends and hosts from it.
     */
    private static final ConcurrentMap<Path, PluginDirectory> PLUGIN_LOADERS = new ConcurrentHashMap<>();

    private static PluginDirectory pluginLoader(Path dir) {
        return PLUGIN_LOADERS.computeIfAbsent(dir.toAbsolutePath().normalize(), PluginDirectory::open);
    }

    /**
     * A fresh factory of the backend under test: from the packaged plugin directory, loaded as the
     * server loads it, when the test names one; else the one {@code backend()} registers in code.
     */
    BackendFactory factory() {
        PluginDirectory loader = plugin;
        if (loader == null) {
            return hooks.backend();
        }
        List<BackendFactory> found = loader.backendFactories();
        for (BackendFactory f : found) {
            if (f.name().equals(backendName)) {
                return f;
            }
        }
        fail("plugin directory " + hooks.pluginDirectory() + " provides no backend named '" + backendName + "' (it provides "
                + found.stream().map(BackendFactory::name).toList() + "): check its jar's META-INF/services/io.backplane.spi.BackendFactory"
                + " and that lib/ holds every dependency");
        throw new AssertionError("unreachable");
    }

    /** After each test: closes the host, checks hygiene, and fails with what was not reported yet. */
    void tearDown() {
        closeAndCheckHygiene();
        List<String> all = allViolations();
        if (all.size() > reported) {
            List<String> fresh = all.subList(reported, all.size());
            reported = all.size();
            fail(report(fresh));
        }
    }

    void closeAndCheckHygiene() {
        try {
            closeHostAndCheck();
        } finally {
            plugin = null; // the loader stays open for the JVM (PLUGIN_LOADERS)
        }
    }

    private void closeHostAndCheck() {
        BackplaneHost h = host;
        if (h == null) {
            return;
        }
        host = null;
        try {
            h.close();
        } catch (RuntimeException e) {
            violation(Invariant.L10, "closing the host threw " + e);
        }
        int open = h.openRequests();
        if (open != 0) {
            violation(Invariant.L10, open + " request(s) still open after the host closed");
        }
        Probe p = probe();
        balance(p.instancesCreated.get(), p.instancesClosed.get(), "instance(s)", "ModelInstance.close()");
        balance(p.modelsLoaded.get(), p.modelsClosed.get(), "model(s)", "Model.close()");
        balance(p.backendsCreated.get(), p.backendsClosed.get(), "backend(s)", "Backend.close()");
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        for (Thread t : leftoverThreads()) { // a handshake with each: wait for it to end, up to the deadline
            try {
                t.join(Duration.ofNanos(Math.max(1, end - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        List<String> left = leftoverThreads().stream().map(Thread::getName).sorted().toList();
        if (!left.isEmpty()) {
            violation(Invariant.L10, "thread(s) still alive 5 s after the host closed: " + left
                    + " — a backend must stop every thread it started in close() (ModelInstance, Model or Backend)");
        }
    }

    private void balance(int created, int closed, String what, String call) {
        if (created != closed) {
            violation(Invariant.L10, created + " " + what + " created but " + closed + " closed after the host closed (" + call
                    + " did not return, or was not called)");
        }
    }

    private List<Thread> leftoverThreads() {
        List<Thread> out = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (!t.isAlive() || t == Thread.currentThread()) {
                continue;
            }
            String n = t.getName();
            boolean ours = n.startsWith("backplane-") || n.startsWith("kit-");
            boolean fresh = !threadsBefore.contains(t) && !JDK_THREADS.contains(n) && !n.startsWith("ForkJoinPool.commonPool") && !n.startsWith("junit-")
                    && !hooks.ignoreLeftoverThread(t);
            if (ours || fresh) {
                out.add(t);
            }
        }
        return out;
    }

    // ---- helpers ----

    BackplaneHost start(List<ModelConfig> configs, List<String> load, @Nullable Gate gate) {
        Set<String> names = new LinkedHashSet<>();
        configs.forEach(m -> names.add(m.name()));
        Probe p = new Probe(conformance, names);
        p.gate(gate);
        probe = p;
        BackplaneHost.Builder b = BackplaneHost.builder().backend(p.wrap(factory())).batcher(new GateBatcher.Factory(gateBatch))
                .modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(hooks.unloadTimeout())
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(200));
        for (ModelConfig m : configs) {
            b.model(m);
        }
        load.forEach(b::loadModel);
        hooks.configureHost(b);
        b.callerRuns(false); // the kit holds batches at the door of execute (Gate): that needs the core's worker threads
        try {
            host = b.build();
        } catch (BackplaneException e) {
            failNow(Invariant.LOAD, "backend '" + backendName + "' could not load model(s) " + load + ": " + e.getMessage() + origin(e));
        }
        return host();
    }

    /** Where an unexpected exception behind a failed load was thrown (a bug in the backend, not a refusal), e.g. " (NullPointerException at X.java:12)". */
    private static String origin(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        if (root instanceof BackplaneException || root.getStackTrace().length == 0) {
            return "";
        }
        StackTraceElement top = root.getStackTrace()[0];
        return " (" + root.getClass().getSimpleName() + " at " + top.getClassName() + "." + top.getMethodName() + "(" + top.getFileName() + ":"
                + top.getLineNumber() + "))";
    }

    BackplaneHost host() {
        BackplaneHost h = host;
        if (h == null) {
            throw new IllegalStateException("no host is running");
        }
        return h;
    }

    Probe probe() {
        Probe p = probe;
        if (p == null) {
            throw new IllegalStateException("no probe");
        }
        return p;
    }

    long nextTag() {
        return tags.incrementAndGet();
    }

    Call send(String model, long tag, boolean stream) {
        return sendRequest(model, tag, conformance::request, stream);
    }

    Call sendRequest(String model, long tag, LongFunction<InferenceRequest> maker, boolean stream) {
        Call call = newCall(model, tag, maker, stream);
        BackplaneHost h = host();
        if (stream) {
            call.requestId = h.stream(call.request, call).id();
        } else {
            h.infer(call.request).whenComplete(call::completed);
        }
        return call;
    }

    Call newCall(String model, long tag, @Nullable LongFunction<InferenceRequest> maker, boolean stream) {
        InferenceRequest base = maker == null ? conformance.request(tag) : java.util.Objects.requireNonNull(maker.apply(tag), "request maker returned null");
        return new Call(tag, retarget(base, model, Ledger.TAG_PREFIX + tag), stream);
    }

    private static InferenceRequest retarget(InferenceRequest r, String model, String id) {
        InferenceRequest.Builder b = InferenceRequest.builder(model).version(r.modelVersion()).id(id).priority(r.priority())
                .timeoutMicros(r.timeoutMicros()).correlationId(r.correlationId());
        r.inputs().forEach(b::input);
        r.requestedOutputs().forEach(b::requestOutput);
        r.parameters().forEach(b::parameter);
        return b.build();
    }

    /** The model batched by the kit's own batcher, which releases {@code requests} queued requests as one batch. */
    ModelConfig withGateBatcher(ModelConfig c, int requests) {
        gateBatch = requests;
        return c.toBuilder().dynamicBatching(null).parameter("batcher", GateBatcher.NAME).build();
    }

    /** How many conformance requests fit in one batch, at most {@code limit}. */
    int batchOf(int limit) {
        ModelConfig c = conformance.config();
        if (!c.batches()) {
            return 0;
        }
        long per = 1;
        List<Tensor> inputs = conformance.request(0).inputs();
        if (!inputs.isEmpty() && inputs.getFirst().rank() > 0) {
            per = Math.max(1, inputs.getFirst().dim(0));
        }
        return (int) Math.min(limit, c.maxBatchSize() / per);
    }

    void applicable(Capability cap, boolean modelUsesIt, String whyNotForThisModel) {
        if (!caps.contains(cap)) {
            Assumptions.abort(cap + " not checked: the backend does not declare Capability." + cap
                    + " (undeclared capabilities are checked by undeclaredCapabilities_failToLoad_withUnsupported)");
        }
        if (!modelUsesIt) {
            Assumptions.abort(cap + " not checked with this conformance model: " + whyNotForThisModel);
        }
    }

    void awaitArrival(Gate gate, Call call) throws InterruptedException {
        List<Long> batch = gate.arrived.poll(hooks.answerTimeout().toNanos(), TimeUnit.NANOSECONDS);
        if (batch == null) {
            failNow(Invariant.L1, describe(call) + " did not reach the backend's execute within " + hooks.answerTimeout().toSeconds() + " s ("
                    + call.outcome() + ")");
        }
    }

    void awaitOrFail(Call call) throws InterruptedException {
        if (!call.await(hooks.answerTimeout())) {
            Ledger.Rec rec = probe().ledger.byTag(call.tag);
            String seen = rec == null ? "it never reached an instance" : "the backend sent " + rec.partials.get() + " response(s) and "
                    + rec.finals.get() + " FINAL(s)";
            failNow(Invariant.L1, describe(call) + " did not end within " + hooks.answerTimeout().toSeconds() + " s: " + seen
                    + "; every request must end with exactly one FINAL");
        }
    }

    /** One terminal, nothing after it; records an L1 violation and returns false otherwise. */
    boolean checkTerminals(Call call) {
        int n = call.terminals.get();
        if (n != 1 || call.afterTerminal.get() > 0) {
            violation(Invariant.L1, describe(call) + " ended " + n + " times" + (call.afterTerminal.get() > 0 ? " and got "
                    + call.afterTerminal.get() + " response(s) after its end" : "") + "; every request ends exactly once");
            return false;
        }
        return true;
    }

    void expectSuccess(Call call) {
        if (!checkTerminals(call)) {
            return;
        }
        if (call.error != null) {
            violation(Invariant.L1, describe(call) + ", a valid request, was not answered: it ended with " + call.outcome());
            return;
        }
        checkResponse(call);
    }

    void expectSuccessAfter(Call good, @Nullable Call bad) {
        if (!checkTerminals(good)) {
            return;
        }
        if (good.error != null) {
            violation(Invariant.L5, describe(good) + ", a valid request, ended with " + good.outcome() + (bad == null ? "" : " after the failing "
                    + describe(bad)) + ": an error must end only the request that caused it");
            return;
        }
        checkResponse(good);
    }

    void expectFailure(Call bad) {
        if (checkTerminals(bad) && bad.error == null) {
            violation(Invariant.L5, describe(bad) + " from failingRequest() succeeded; the backend must answer it with an error response"
                    + " (ResponseSender.sendError) so the kit can check that errors stay per request");
        }
    }

    void checkResponse(Call call) {
        if (!conformance.config().decoupled() && call.responses.size() != 1) {
            violation(Invariant.L2, describe(call) + " got " + call.responses.size() + " responses; a plain model sends exactly one");
            return;
        }
        try {
            conformance.check().check(call.request, List.copyOf(call.responses));
        } catch (Throwable t) {
            violation(Invariant.L1, describe(call) + " was answered, but its response failed the model's check (a wrong result, or a response"
                    + " routed to the wrong request): " + t.getMessage());
        }
    }

    void expectReady(String model) {
        if (!host().isModelReady(model)) {
            violation(Invariant.L8, "model '" + model + "' is not ready after its load returned: an instance's isReady() returned false"
                    + " (isReady must be true once createInstance returned a working instance)");
        }
    }

    void expectClosedAfterUnload(Invariant inv, String model) {
        Probe p = probe();
        if (p.instancesClosed.get() != p.instancesCreated.get() || p.modelsClosed.get() != p.modelsLoaded.get()) {
            violation(inv, "after unloading model '" + model + "', " + p.instancesClosed.get() + " of " + p.instancesCreated.get()
                    + " instance(s) and " + p.modelsClosed.get() + " of " + p.modelsLoaded.get() + " model(s) were closed: close() did not return"
                    + " within the unload deadline");
        }
    }

    String describe(Call call) {
        Probe p = probe;
        Ledger.Rec rec = p == null ? null : p.ledger.byTag(call.tag);
        if (rec != null) {
            return rec.describe();
        }
        return call.requestId > 0 ? Ledger.Rec.describe(call.requestId, Long.toString(call.tag)) : "the request with tag " + call.tag;
    }

    List<Thread> startCallers(int n, ModelConfig c, List<Call> calls, AtomicBoolean stop) {
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < n; t++) {
            threads.add(kitThread("kit-caller-" + t, () -> {
                while (!stop.get()) {
                    Call call = send(c.name(), nextTag(), c.decoupled());
                    calls.add(call);
                    try {
                        if (!call.await(hooks.answerTimeout())) {
                            return;
                        }
                    } catch (InterruptedException e) {
                        return;
                    }
                    if (call.error != null) {
                        sleep(1); // the model is unloaded for a moment: do not spin
                    }
                }
            }));
        }
        return threads;
    }

    void waitForCalls(List<Call> calls, int n) {
        waitUntil(() -> {
            synchronized (calls) {
                return calls.stream().filter(x -> x.terminals.get() > 0).count() >= n;
            }
        }, n + " requests to end");
    }

    void waitUntil(java.util.function.BooleanSupplier condition, String what) {
        try {
            Await.until(condition, hooks.answerTimeout(), what);
        } catch (AssertionError e) {
            failNow(Invariant.L1, e.getMessage());
        }
    }

    Thread kitThread(String name, Runnable body) {
        return Thread.ofPlatform().name(name).daemon().start(() -> {
            try {
                body.run();
            } catch (Throwable t) {
                kitViolations.add("[kit] thread " + name + " failed: " + t);
            }
        });
    }

    void joinAll(List<Thread> threads) throws InterruptedException {
        for (Thread t : threads) {
            t.join(hooks.answerTimeout().plus(hooks.unloadTimeout()));
            if (t.isAlive()) {
                failNow(Invariant.L1, "kit thread " + t.getName() + " is still waiting after " + hooks.answerTimeout().plus(hooks.unloadTimeout()).toSeconds()
                        + " s: a request or a load/unload never returned");
            }
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    void violation(Invariant invariant, String message) {
        Probe p = probe;
        if (p != null) {
            p.ledger.violation(invariant, message);
        } else {
            kitViolations.add(invariant.label() + " " + message);
        }
    }

    private List<String> allViolations() {
        List<String> out = new ArrayList<>(kitViolations);
        Probe p = probe;
        if (p != null) {
            out.addAll(p.ledger.violations());
        }
        return out;
    }

    void assertNoViolations() {
        List<String> all = allViolations();
        if (all.size() > reported) {
            List<String> fresh = all.subList(reported, all.size());
            reported = all.size();
            fail(report(fresh));
        }
    }

    void failNow(Invariant invariant, String message) {
        violation(invariant, message);
        assertNoViolations();
    }

    private String report(List<String> violations) {
        StringBuilder sb = new StringBuilder(violations.getFirst());
        if (violations.size() > 1) {
            sb.append("\n").append(violations.size()).append(" conformance violations of backend '").append(backendName).append("':");
            int shown = 0;
            for (String v : violations) {
                if (shown++ == 20) {
                    sb.append("\n  … and ").append(violations.size() - 20).append(" more");
                    break;
                }
                sb.append("\n  ").append(v);
            }
        }
        return sb.toString();
    }
}
