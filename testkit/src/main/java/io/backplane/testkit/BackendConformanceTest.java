package io.backplane.testkit;

import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.RequestHandle;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongFunction;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The conformance test a backend author extends: it runs the real core ({@link BackplaneHost})
 * against the backend and checks, from the backend's side, the lifecycle contract of DESIGN.md.
 *
 * <pre>{@code
 * class MyBackendConformanceTest extends BackendConformanceTest {
 *     protected BackendFactory backend() { return new MyBackendFactory(); }
 *     protected ConformanceModel model() { return ConformanceModel.builder(config).request(...).check(...).build(); }
 *     protected Set<Capability> capabilities() { return EnumSet.of(Capability.CANCELLATION); }
 * }
 * }</pre>
 *
 * <p>Every check is a test method of this class. A failure message starts with the invariant
 * ({@code [L2 sender state]}, see {@link Invariant}) and names the request ({@code request #12
 * (tag 3)}: the core's id and the kit's tag, which is also the request's id {@code kit-3}). A
 * check that does not apply to the declared capabilities or to the conformance model is
 * <em>aborted</em> with the reason ({@link Assumptions#abort(String)}), never passed silently;
 * a declaration that contradicts the config or the behaviour fails.
 *
 * <p>After every test the kit closes the host and checks that nothing is left: no open request,
 * every instance, model and backend closed as often as created, no {@code backplane-*} thread and
 * no other thread started during the test (L10).
 *
 * <p>Each test builds its own host with a fresh {@link #backend()}: return a new factory each
 * time. The methods below are called on the test thread.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
public abstract class BackendConformanceTest {
    /** The harness this test instance runs on; its state lives as long as the instance, as JUnit makes one per test. */
    private final ConformanceRun kit = new ConformanceRun(new ConformanceRun.Hooks() {
        @Override
        public BackendFactory backend() {
            return BackendConformanceTest.this.backend();
        }

        @Override
        public @Nullable Path pluginDirectory() {
            return BackendConformanceTest.this.pluginDirectory();
        }

        @Override
        public Duration unloadTimeout() {
            return BackendConformanceTest.this.unloadTimeout();
        }

        @Override
        public Duration answerTimeout() {
            return BackendConformanceTest.this.answerTimeout();
        }

        @Override
        public void configureHost(BackplaneHost.Builder builder) {
            BackendConformanceTest.this.configureHost(builder);
        }

        @Override
        public boolean ignoreLeftoverThread(Thread thread) {
            return BackendConformanceTest.this.ignoreLeftoverThread(thread);
        }
    });

    // ---- what the backend author provides ----

    /**
     * The backend under test: a new factory per call (one host per test). With a
     * {@link #pluginDirectory()}, only its {@link BackendFactory#name()} is used: the kit takes the
     * factory of that name from the directory.
     */
    protected abstract BackendFactory backend();

    /** The system property that names the packaged plugin directory (see {@link #pluginDirectory()}). */
    public static final String PLUGIN_DIRECTORY_PROPERTY = "backplane.plugin.directory";

    /**
     * The packaged plugin directory to test, loaded exactly as {@code backplane serve} loads each
     * folder of its backends directory: the jars in it and in its {@code lib/}, in a class loader of
     * their own that sees only the JDK, the SPI and SLF4J from the host. A jar missing from
     * {@code lib/}, a wrong services file or a class that leaks the host's class path then fails here
     * instead of at serve time. The kit takes the factory named as {@link #backend()}'s. It opens each
     * directory once per JVM, as a server opens each folder once per process (a JNI library binds to
     * the first class loader that loads it), and takes fresh factories from it for every test.
     *
     * <p>Default: the directory the system property {@value #PLUGIN_DIRECTORY_PROPERTY} names, else
     * null: the kit then registers {@link #backend()} in code. A plugin directory exists only after
     * {@code package}, so run the test in Maven's {@code integration-test} phase (failsafe, a class
     * named {@code *IT}) with the property set, as the archetype's project does.
     */
    protected @Nullable Path pluginDirectory() {
        String dir = System.getProperty(PLUGIN_DIRECTORY_PROPERTY);
        return dir == null || dir.isBlank() ? null : Path.of(dir);
    }

    /** A model the backend loads, how to make a valid request for it and how to check the answer. */
    protected abstract ConformanceModel model();

    /** What the backend declares it can do; the kit uses the {@linkplain Capability#closure closure}. */
    protected abstract Set<Capability> capabilities();

    /**
     * The unload deadline of the kit's hosts (L7): a {@code close()} that does not return within it
     * is reported (L7), and so is an {@code execute} that stays running after the FINAL of all its
     * requests for {@link #answerTimeout()} (L3).
     */
    protected Duration unloadTimeout() {
        return Duration.ofSeconds(5);
    }

    /** How long the kit waits for a request to end, or for a request to reach {@code execute}. */
    protected Duration answerTimeout() {
        return Duration.ofSeconds(30);
    }

    /** Client threads in the concurrency checks. */
    protected int concurrentCallers() {
        return 4;
    }

    /** Requests per client thread in the concurrency checks. */
    protected int requestsPerCaller() {
        return 8;
    }

    /**
     * Adds host settings, e.g. {@code builder.backendOption("mybackend", "key", "value")}. The kit
     * sets its own models, backend, batcher and unload deadline, and runs without caller-runs.
     */
    protected void configureHost(BackplaneHost.Builder builder) {
    }

    /**
     * Whether a thread that the test started and that is still alive after close is expected
     * (e.g. a JDK-internal pool). The kit already ignores the JDK's {@code process reaper},
     * {@code Common-Cleaner} and the common fork-join pool.
     */
    protected boolean ignoreLeftoverThread(Thread thread) {
        return false;
    }

    // ---- the checks ----

    /** CAPABILITIES: the conformance model asks only for declared capabilities. */
    @Test
    public void declaredCapabilities_matchTheModelConfig() {
        ModelConfig c = kit.conformance().config();
        List<String> problems = new ArrayList<>();
        if (c.decoupled() && !kit.caps().contains(Capability.STREAMING)) {
            problems.add("the model is decoupled (decoupled: true) but capabilities() lacks STREAMING; declare Capability.STREAMING"
                    + " (or DECOUPLED_STREAMING)");
        }
        if (c.batches() && !kit.caps().contains(Capability.BATCHING)) {
            problems.add("the model has max_batch_size " + c.maxBatchSize() + " but capabilities() lacks BATCHING; declare Capability.BATCHING");
        }
        if (usesGpu(c) && !kit.caps().contains(Capability.GPU)) {
            problems.add("the model has an instance group of KIND_GPU but capabilities() lacks GPU; declare Capability.GPU");
        }
        for (String p : problems) {
            kit.violation(Invariant.CAPABILITIES, "backend '" + kit.backendName() + "': " + p);
        }
        kit.assertNoViolations();
    }

    /** L1, L2, L6, L8: valid requests, one after another, each answered once with its own response. */
    @Test
    public void requests_areEachAnsweredExactlyOnce_withTheirOwnResponse() throws Exception {
        ModelConfig c = kit.conformance().config();
        kit.start(List.of(c), List.of(c.name()), null);
        kit.expectReady(c.name());
        for (int i = 0; i < 12; i++) {
            Call call = kit.send(c.name(), kit.nextTag(), c.decoupled() || i % 2 == 1);
            kit.awaitOrFail(call);
            kit.expectSuccess(call);
        }
        kit.assertNoViolations();
    }

    /**
     * L3: once a request's FINAL reached its client, the request holds nothing, its execute returns
     * (a handshake, within the answer timeout) and unload closes instances and model.
     */
    @Test
    public void finalFlag_releasesTheRequest_soUnloadDoesNotWait() throws Exception {
        ModelConfig c = kit.conformance().config();
        BackplaneHost h = kit.start(List.of(c), List.of(c.name()), null);
        Call call = kit.send(c.name(), kit.nextTag(), c.decoupled());
        kit.awaitOrFail(call);
        kit.expectSuccess(call);
        int open = h.openRequests();
        if (open != 0) {
            kit.violation(Invariant.L3, kit.describe(call) + " got its FINAL, but the host still counts " + open + " open request(s)");
        }
        Ledger.Rec rec = kit.probe().ledger.byTag(call.tag);
        if (rec != null && !rec.returned.await(answerTimeout().toNanos(), TimeUnit.NANOSECONDS)) {
            kit.violation(Invariant.L3, kit.describe(call) + " had its FINAL, but the backend stayed inside execute " + answerTimeout().toMillis()
                    + " ms after it (still executing: " + kit.probe().executing + "); return from execute once every request of the batch has its"
                    + " FINAL: work after FINAL holds the instance, and unload must interrupt it at its deadline");
        }
        h.unload(c.name());
        kit.expectClosedAfterUnload(Invariant.L3, c.name());
        kit.assertNoViolations();
    }

    /** L5: a request the backend answers with an error does not fail any other request. */
    @Test
    public void errors_stayPerRequest() throws Exception {
        LongFunction<InferenceRequest> failing = kit.conformance().failingRequest();
        if (failing == null) {
            Assumptions.abort("L5 not checked: the ConformanceModel has no failingRequest(...); add a request the backend answers with an error"
                    + " (e.g. a parameter it refuses) to check that errors stay per request");
        }
        ModelConfig c = kit.conformance().config();
        List<ModelConfig> configs = new ArrayList<>(List.of(c));
        String batchModel = c.name() + "_kitbatch";
        int k = kit.batchOf(3);
        boolean inBatch = c.batches() && kit.caps().contains(Capability.BATCHING) && k >= 2;
        if (inBatch) {
            configs.add(kit.withGateBatcher(rename(c, batchModel), Math.min(k, 3)));
        }
        List<String> load = configs.stream().map(ModelConfig::name).toList();
        kit.start(configs, load, null);
        for (int i = 0; i < 4; i++) {
            Call bad = kit.sendRequest(c.name(), kit.nextTag(), failing, c.decoupled());
            kit.awaitOrFail(bad);
            kit.expectFailure(bad);
            Call good = kit.send(c.name(), kit.nextTag(), c.decoupled());
            kit.awaitOrFail(good);
            kit.expectSuccessAfter(good, bad);
        }
        if (inBatch) {
            int n = Math.min(k, 3);
            List<Call> calls = new ArrayList<>();
            Call bad = null;
            for (int i = 0; i < n; i++) {
                Call call = i == 1 ? kit.sendRequest(batchModel, kit.nextTag(), failing, c.decoupled()) : kit.send(batchModel, kit.nextTag(), c.decoupled());
                if (i == 1) {
                    bad = call;
                }
                calls.add(call);
            }
            for (Call call : calls) {
                kit.awaitOrFail(call);
            }
            for (Call call : calls) {
                if (call == bad) {
                    kit.expectFailure(call);
                } else {
                    kit.expectSuccessAfter(call, bad);
                }
            }
        }
        kit.expectReady(c.name());
        kit.assertNoViolations();
    }

    /** B6: a request cancelled while it executes still ends exactly once; a backend that declares CANCELLATION ends it with CANCELLED. */
    @Test
    public void cancellation_duringExecute_endsTheRequestOnce() throws Exception {
        ModelConfig c = kit.conformance().config();
        Gate gate = new Gate();
        kit.start(List.of(c), List.of(c.name()), gate);
        Call call = kit.newCall(c.name(), kit.nextTag(), null, true);
        RequestHandle handle = kit.host().stream(call.request, call);
        call.requestId = handle.id();
        kit.awaitArrival(gate, call);
        boolean open = handle.cancel();
        gate.open();
        kit.awaitOrFail(call);
        kit.checkTerminals(call);
        Ledger.Rec rec = kit.probe().ledger.byTag(call.tag);
        boolean endedCancelled = call.error != null && call.error.code() == ErrorCode.CANCELLED;
        boolean saw = rec != null && rec.sawCancelled;
        if (!open) {
            kit.violation(Invariant.B6, kit.describe(call) + " had already ended before execute began (" + call.outcome() + ")");
        } else if (kit.caps().contains(Capability.CANCELLATION)) {
            if (!endedCancelled) {
                kit.violation(Invariant.B6, kit.describe(call) + " was cancelled before the backend's execute began and the backend declares CANCELLATION, but it"
                        + " ended with " + call.outcome() + (saw ? "" : " and the backend never called isCancelled()")
                        + "; check ScheduledRequest.isCancelled() and end the request with ErrorCode.CANCELLED");
            }
        } else if (endedCancelled && saw) {
            kit.violation(Invariant.CAPABILITIES, kit.describe(call) + ": the backend observed isCancelled() and ended the request with CANCELLED, but"
                    + " capabilities() lacks CANCELLATION; declare Capability.CANCELLATION");
        } else if (call.error == null) {
            kit.checkResponse(call);
        }
        kit.expectReady(c.name());
        kit.assertNoViolations();
    }

    /** L7, L9: unload while requests execute and queue: each ends once, within the deadline; the model then reloads. */
    @Test
    public void unload_whileRequestsRun_endsEachOnce_withinTheDeadline_andReloads() throws Exception {
        ModelConfig c = kit.conformance().config();
        Gate gate = new Gate();
        BackplaneHost h = kit.start(List.of(c), List.of(c.name()), gate);
        Call first = kit.send(c.name(), kit.nextTag(), c.decoupled());
        kit.awaitArrival(gate, first);
        List<Call> later = List.of(kit.send(c.name(), kit.nextTag(), c.decoupled()), kit.send(c.name(), kit.nextTag(), c.decoupled()));
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread unloader = kit.kitThread("kit-unload", () -> {
            try {
                h.unload(c.name());
            } catch (Throwable t) {
                failed.set(t);
            }
        });
        kit.waitUntil(() -> !h.isModelReady(c.name()), "model '" + c.name() + "' to start unloading");
        gate.open();
        kit.probe().gate(null);
        unloader.join(unloadTimeout().plus(answerTimeout()));
        if (unloader.isAlive()) {
            kit.failNow(Invariant.L7, "unloading model '" + c.name() + "' did not return within the unload deadline plus " + answerTimeout().toSeconds()
                    + " s; still executing: " + kit.probe().executing);
        }
        if (failed.get() != null) {
            kit.violation(Invariant.L7, "unloading model '" + c.name() + "' threw " + failed.get());
        }
        kit.awaitOrFail(first);
        kit.expectSuccess(first);
        for (Call call : later) {
            kit.awaitOrFail(call);
            kit.checkTerminals(call);
            if (call.error == null) {
                kit.checkResponse(call);
            } else if (call.error.code() != ErrorCode.UNAVAILABLE) {
                kit.violation(Invariant.L7, kit.describe(call) + " was queued or executing when model '" + c.name() + "' unloaded and ended with "
                        + call.outcome() + "; expected its response, or UNAVAILABLE from the core");
            }
        }
        kit.expectClosedAfterUnload(Invariant.L7, c.name());
        try {
            h.load(c.name());
        } catch (BackplaneException e) {
            kit.failNow(Invariant.L9, "loading model '" + c.name() + "' again after it was unloaded failed: " + e.getMessage()
                    + " — release every resource of a model in Model.close()");
        }
        Call again = kit.send(c.name(), kit.nextTag(), c.decoupled());
        kit.awaitOrFail(again);
        kit.expectSuccess(again);
        kit.assertNoViolations();
    }

    /** L9: reloads while callers keep sending: the old version serves until the swap, so no request fails. */
    @Test
    public void reload_whileRequestsRun_losesNoRequest() throws Exception {
        ModelConfig c = kit.conformance().config();
        BackplaneHost h = kit.start(List.of(c), List.of(c.name()), null);
        List<Call> calls = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> callers = kit.startCallers(2, c, calls, stop);
        for (int i = 1; i <= 3; i++) {
            kit.waitForCalls(calls, 2 * i);
            try {
                h.load(c.name());
            } catch (BackplaneException e) {
                kit.violation(Invariant.L9, "reload #" + i + " of model '" + c.name() + "' failed while requests ran: " + e.getMessage()
                        + " — a new version loads beside the old one, so Backend.loadModel must work while the old Model is still open");
            }
        }
        kit.waitForCalls(calls, 8);
        stop.set(true);
        kit.joinAll(callers);
        for (Call call : List.copyOf(calls)) {
            kit.awaitOrFail(call);
            // The core ends requests still queued on the old version at the swap with UNAVAILABLE (L7); anything else is the backend's.
            if (kit.checkTerminals(call) && call.error != null && call.error.code() != ErrorCode.UNAVAILABLE) {
                kit.violation(Invariant.L9, kit.describe(call) + " ended with " + call.outcome() + " during a reload; the old version serves until the new"
                        + " one is ready and the swap is atomic, so a request gets its response (or UNAVAILABLE from the core)");
            } else if (call.error == null) {
                kit.checkResponse(call);
            }
        }
        calls.clear();
        stop.set(false);
        callers = kit.startCallers(2, c, calls, stop);
        for (int i = 0; i < 2; i++) {
            kit.waitForCalls(calls, 2 * i + 1);
            h.unload(c.name());
            try {
                h.load(c.name());
            } catch (BackplaneException e) {
                kit.violation(Invariant.L9, "loading model '" + c.name() + "' after unload #" + (i + 1) + " failed: " + e.getMessage());
            }
        }
        kit.waitForCalls(calls, 6);
        stop.set(true);
        kit.joinAll(callers);
        for (Call call : List.copyOf(calls)) {
            kit.awaitOrFail(call);
            if (kit.checkTerminals(call) && call.error != null && call.error.code() != ErrorCode.UNAVAILABLE) {
                kit.violation(Invariant.L7, kit.describe(call) + " ended with " + call.outcome() + " while the model was unloaded and loaded again;"
                        + " expected its response, or UNAVAILABLE from the core");
            } else if (call.error == null) {
                kit.checkResponse(call);
            }
        }
        kit.expectReady(c.name());
        kit.assertNoViolations();
    }

    /** L1: many callers at once, two instances: each caller gets its own response, once. */
    @Test
    public void concurrentRequests_eachCallerGetsItsOwnResponse() throws Exception {
        ModelConfig c = withInstances(kit.conformance().config(), 2);
        kit.start(List.of(c), List.of(c.name()), null);
        int callers = concurrentCallers();
        int each = requestsPerCaller();
        CountDownLatch go = new CountDownLatch(1);
        List<Call> calls = new CopyOnWriteArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < callers; t++) {
            threads.add(kit.kitThread("kit-caller-" + t, () -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < each; i++) {
                    calls.add(kit.send(c.name(), kit.nextTag(), c.decoupled() || i % 2 == 0));
                }
            }));
        }
        go.countDown();
        kit.joinAll(threads);
        for (Call call : calls) {
            kit.awaitOrFail(call);
            kit.expectSuccess(call);
        }
        if (calls.size() != callers * each) {
            kit.failNow(Invariant.L1, "only " + calls.size() + " of " + callers * each + " requests could be sent");
        }
        kit.assertNoViolations();
    }

    /** L9 (loading): Backend.loadModel runs concurrently for different models; each serves, each unloads. */
    @Test
    public void concurrentModelLoads_eachModelServes() throws Exception {
        ModelConfig c = kit.conformance().config();
        List<ModelConfig> configs = List.of(rename(c, c.name() + "_kit1"), rename(c, c.name() + "_kit2"), rename(c, c.name() + "_kit3"));
        BackplaneHost h = kit.start(configs, List.of(), null);
        CountDownLatch go = new CountDownLatch(1);
        Map<String, Throwable> failures = Collections.synchronizedMap(new LinkedHashMap<>());
        List<Thread> loaders = new ArrayList<>();
        for (ModelConfig m : configs) {
            loaders.add(kit.kitThread("kit-load-" + m.name(), () -> {
                try {
                    go.await();
                    h.load(m.name());
                } catch (Throwable t) {
                    failures.put(m.name(), t);
                }
            }));
        }
        go.countDown();
        kit.joinAll(loaders);
        failures.forEach((m, t) -> kit.violation(Invariant.L9, "loading model '" + m + "' concurrently with other models failed: " + t.getMessage()
                + " — Backend.loadModel may run concurrently for different models"));
        kit.assertNoViolations();
        for (ModelConfig m : configs) {
            Call call = kit.send(m.name(), kit.nextTag(), c.decoupled());
            kit.awaitOrFail(call);
            kit.expectSuccess(call);
        }
        List<Thread> unloaders = new ArrayList<>();
        for (ModelConfig m : configs) {
            unloaders.add(kit.kitThread("kit-unload-" + m.name(), () -> h.unload(m.name())));
        }
        kit.joinAll(unloaders);
        kit.expectClosedAfterUnload(Invariant.L7, "all");
        kit.assertNoViolations();
    }

    /** L10: closing the host with a request executing and one queued ends both once and leaves nothing behind. */
    @Test
    public void close_withRequestsInFlight_leavesNothingBehind() throws Exception {
        ModelConfig c = kit.conformance().config();
        Gate gate = new Gate();
        BackplaneHost h = kit.start(List.of(c), List.of(c.name()), gate);
        Call executing = kit.send(c.name(), kit.nextTag(), c.decoupled());
        kit.awaitArrival(gate, executing);
        Call queued = kit.send(c.name(), kit.nextTag(), c.decoupled());
        Thread closer = kit.kitThread("kit-close", h::close);
        kit.waitUntil(() -> !h.isLive(), "the host to start closing");
        gate.open();
        closer.join(unloadTimeout().plus(answerTimeout()));
        if (closer.isAlive()) {
            kit.failNow(Invariant.L10, "closing the host did not return within the unload deadline plus " + answerTimeout().toSeconds() + " s; still"
                    + " executing: " + kit.probe().executing);
        }
        for (Call call : List.of(executing, queued)) {
            kit.awaitOrFail(call);
            if (kit.checkTerminals(call) && call.error != null && call.error.code() != ErrorCode.UNAVAILABLE) {
                kit.violation(Invariant.L10, kit.describe(call) + " was in flight when the host closed and ended with " + call.outcome()
                        + "; expected its response, or UNAVAILABLE from the core");
            } else if (call.error == null) {
                kit.checkResponse(call);
            }
        }
        kit.closeAndCheckHygiene();
        kit.assertNoViolations();
    }

    /** BATCHING: a batch of several requests, formed by the kit, is answered request by request. */
    @Test
    public void batching_multiRequestBatch_eachRequestAnsweredOnce() throws Exception {
        ModelConfig c = kit.conformance().config();
        kit.applicable(Capability.BATCHING, c.batches(), "its max_batch_size is 0; use a model with max_batch_size > 0 to verify BATCHING");
        int k = kit.batchOf(4);
        if (k < 2) {
            Assumptions.abort("BATCHING not checked: max_batch_size " + c.maxBatchSize() + " leaves no room for two requests of the conformance model");
        }
        ModelConfig batched = kit.withGateBatcher(c, k);
        kit.start(List.of(batched), List.of(c.name()), null);
        List<Call> calls = new ArrayList<>();
        for (int i = 0; i < k; i++) {
            calls.add(kit.send(c.name(), kit.nextTag(), c.decoupled()));
        }
        for (Call call : calls) {
            kit.awaitOrFail(call);
            kit.expectSuccess(call);
        }
        for (Call call : calls) {
            Ledger.Rec rec = kit.probe().ledger.byTag(call.tag);
            if (rec != null && rec.batchRequests != k) {
                kit.failNow(Invariant.CAPABILITIES, kit.describe(call) + " ran in a batch of " + rec.batchRequests + " requests, not " + k
                        + " as the kit's batcher formed it (a kit or core bug; please report it)");
            }
        }
        kit.assertNoViolations();
    }

    /** STREAMING, DECOUPLED_STREAMING: concurrent streams each get their own responses and one terminal. */
    @Test
    public void streaming_concurrentStreams_eachEndsOnce() throws Exception {
        ModelConfig c = kit.conformance().config();
        kit.applicable(Capability.STREAMING, c.decoupled(), "it is not decoupled; add a test class with a decoupled model to verify STREAMING");
        kit.start(List.of(c), List.of(c.name()), null);
        List<Call> calls = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            calls.add(kit.send(c.name(), kit.nextTag(), true));
        }
        boolean afterReturn = false;
        for (Call call : calls) {
            kit.awaitOrFail(call);
            kit.expectSuccess(call);
            Ledger.Rec rec = kit.probe().ledger.byTag(call.tag);
            afterReturn |= rec != null && rec.sentAfterReturn;
            if (rec != null && rec.sentAfterReturn && !kit.caps().contains(Capability.DECOUPLED_STREAMING)) {
                kit.violation(Invariant.CAPABILITIES, kit.describe(call) + " was answered after execute returned, but capabilities() lacks"
                        + " DECOUPLED_STREAMING; declare Capability.DECOUPLED_STREAMING");
            }
        }
        if (kit.caps().contains(Capability.DECOUPLED_STREAMING) && !afterReturn) {
            kit.violation(Invariant.CAPABILITIES, "the backend declares DECOUPLED_STREAMING but answered all " + calls.size()
                    + " requests inside execute; declare STREAMING instead, or answer from another thread after execute returns");
        }
        kit.assertNoViolations();
    }

    /** GPU: instances of kind GPU are created and serve. */
    @Test
    public void gpu_instancesOfKindGpu_serve() throws Exception {
        ModelConfig c = kit.conformance().config();
        kit.applicable(Capability.GPU, usesGpu(c), "it has no instance group of KIND_GPU; use a model with one to verify GPU");
        kit.start(List.of(c), List.of(c.name()), null);
        for (int i = 0; i < 3; i++) {
            Call call = kit.send(c.name(), kit.nextTag(), c.decoupled());
            kit.awaitOrFail(call);
            kit.expectSuccess(call);
        }
        if (!kit.probe().instanceKinds.contains(InstanceKind.GPU)) {
            kit.violation(Invariant.CAPABILITIES, "the backend declares GPU but created no instance of kind GPU (kinds: " + kit.probe().instanceKinds + ")");
        }
        kit.assertNoViolations();
    }

    /**
     * CAPABILITIES: a config asking for a capability the backend does not declare must fail to
     * load with UNSUPPORTED (or INVALID_ARGUMENT), never load and then behave otherwise.
     */
    @Test
    public void undeclaredCapabilities_failToLoad_withUnsupported() {
        ModelConfig c = kit.conformance().config();
        Map<Capability, ModelConfig> asks = new LinkedHashMap<>();
        if (!kit.caps().contains(Capability.STREAMING) && !c.decoupled()) {
            asks.put(Capability.STREAMING, rename(c, c.name() + "_kitstreaming").toBuilder().decoupled(true).build());
        }
        if (!kit.caps().contains(Capability.BATCHING) && !c.batches()) {
            asks.put(Capability.BATCHING, rename(c, c.name() + "_kitbatching").toBuilder().maxBatchSize(4).build());
        }
        if (!kit.caps().contains(Capability.GPU) && !usesGpu(c)) {
            asks.put(Capability.GPU, rename(c, c.name() + "_kitgpu").toBuilder().clearInstanceGroups()
                    .instanceGroup(InstanceGroup.of("kitgpu", 1, InstanceKind.GPU, List.of(0))).build());
        }
        if (asks.isEmpty()) {
            Assumptions.abort("not applicable: the backend declares every capability a model config can ask for (" + kit.caps() + ")");
        }
        BackplaneHost h = kit.start(List.copyOf(asks.values()), List.of(), null);
        asks.forEach((cap, m) -> {
            try {
                h.load(m.name());
                kit.violation(Invariant.CAPABILITIES, "model '" + m.name() + "' asks for " + cap + " (" + what(cap) + "), which the backend does not"
                        + " declare, and it loaded: refuse it in autoCompleteConfig or loadModel with BackplaneException(ErrorCode.UNSUPPORTED, ...),"
                        + " or declare Capability." + cap);
            } catch (BackplaneException e) {
                if (e.code() != ErrorCode.UNSUPPORTED && e.code() != ErrorCode.INVALID_ARGUMENT) {
                    kit.violation(Invariant.CAPABILITIES, "model '" + m.name() + "' asks for " + cap + " (" + what(cap) + "), which the backend does not"
                            + " declare; its load failed with " + e.code() + " (" + e.getMessage() + "), expected UNSUPPORTED");
                }
            }
        });
        kit.assertNoViolations();
    }
    // ---- lifecycle of each test ----

    @BeforeEach
    final void kitSetUp() {
        kit.setUp(this::model, this::capabilities);
    }

    @AfterEach
    final void kitTearDown() {
        kit.tearDown();
    }

    // ---- what the checks vary ----

    private static ModelConfig rename(ModelConfig c, String name) {
        return c.toBuilder().name(name).build();
    }

    private static ModelConfig withInstances(ModelConfig c, int count) {
        ModelConfig.Builder b = c.toBuilder().clearInstanceGroups();
        if (c.instanceGroups().isEmpty()) {
            b.instanceGroup(InstanceGroup.of("", count, InstanceKind.AUTO, List.of()));
        } else {
            for (InstanceGroup g : c.instanceGroups()) {
                b.instanceGroup(InstanceGroup.of(g.name(), Math.max(count, g.count()), g.kind(), g.gpus()));
            }
        }
        return b.build();
    }

    private static boolean usesGpu(ModelConfig c) {
        return c.instanceGroups().stream().anyMatch(g -> g.kind() == InstanceKind.GPU);
    }

    private static String what(Capability cap) {
        return switch (cap) {
            case STREAMING, DECOUPLED_STREAMING -> "decoupled: true";
            case BATCHING -> "max_batch_size: 4";
            case GPU -> "instance_group { kind: KIND_GPU }";
            case CANCELLATION -> "cancellation";
        };
    }
}
