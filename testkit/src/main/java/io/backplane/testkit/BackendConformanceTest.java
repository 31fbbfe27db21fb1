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
    private static final Set<String> JDK_THREADS = Set.of("process reaper", "Common-Cleaner", "Attach Listener", "Signal Dispatcher");

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

    // ---- what the backend author provides ----

    /** The backend under test: a new factory per call (one host per test). */
    protected abstract BackendFactory backend();

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
        ModelConfig c = conformance.config();
        List<String> problems = new ArrayList<>();
        if (c.decoupled() && !caps.contains(Capability.STREAMING)) {
            problems.add("the model is decoupled (decoupled: true) but capabilities() lacks STREAMING; declare Capability.STREAMING"
                    + " (or DECOUPLED_STREAMING)");
        }
        if (c.batches() && !caps.contains(Capability.BATCHING)) {
            problems.add("the model has max_batch_size " + c.maxBatchSize() + " but capabilities() lacks BATCHING; declare Capability.BATCHING");
        }
        if (usesGpu(c) && !caps.contains(Capability.GPU)) {
            problems.add("the model has an instance group of KIND_GPU but capabilities() lacks GPU; declare Capability.GPU");
        }
        for (String p : problems) {
            violation(Invariant.CAPABILITIES, "backend '" + backendName + "': " + p);
        }
        assertNoViolations();
    }

    /** L1, L2, L6, L8: valid requests, one after another, each answered once with its own response. */
    @Test
    public void requests_areEachAnsweredExactlyOnce_withTheirOwnResponse() throws Exception {
        ModelConfig c = conformance.config();
        start(List.of(c), List.of(c.name()), null);
        expectReady(c.name());
        for (int i = 0; i < 12; i++) {
            Call call = send(c.name(), nextTag(), c.decoupled() || i % 2 == 1);
            awaitOrFail(call);
            expectSuccess(call);
        }
        assertNoViolations();
    }

    /**
     * L3: once a request's FINAL reached its client, the request holds nothing, its execute returns
     * (a handshake, within the answer timeout) and unload closes instances and model.
     */
    @Test
    public void finalFlag_releasesTheRequest_soUnloadDoesNotWait() throws Exception {
        ModelConfig c = conformance.config();
        BackplaneHost h = start(List.of(c), List.of(c.name()), null);
        Call call = send(c.name(), nextTag(), c.decoupled());
        awaitOrFail(call);
        expectSuccess(call);
        int open = h.openRequests();
        if (open != 0) {
            violation(Invariant.L3, describe(call) + " got its FINAL, but the host still counts " + open + " open request(s)");
        }
        Ledger.Rec rec = probe().ledger.byTag(call.tag);
        if (rec != null && !rec.returned.await(answerTimeout().toNanos(), TimeUnit.NANOSECONDS)) {
            violation(Invariant.L3, describe(call) + " had its FINAL, but the backend stayed inside execute " + answerTimeout().toMillis()
                    + " ms after it (still executing: " + probe().executing + "); return from execute once every request of the batch has its"
                    + " FINAL: work after FINAL holds the instance, and unload must interrupt it at its deadline");
        }
        h.unload(c.name());
        expectClosedAfterUnload(Invariant.L3, c.name());
        assertNoViolations();
    }

    /** L5: a request the backend answers with an error does not fail any other request. */
    @Test
    public void errors_stayPerRequest() throws Exception {
        LongFunction<InferenceRequest> failing = conformance.failingRequest();
        if (failing == null) {
            Assumptions.abort("L5 not checked: the ConformanceModel has no failingRequest(...); add a request the backend answers with an error"
                    + " (e.g. a parameter it refuses) to check that errors stay per request");
        }
        ModelConfig c = conformance.config();
        List<ModelConfig> configs = new ArrayList<>(List.of(c));
        String batchModel = c.name() + "_kitbatch";
        int k = batchOf(3);
        boolean inBatch = c.batches() && caps.contains(Capability.BATCHING) && k >= 2;
        if (inBatch) {
            configs.add(withGateBatcher(rename(c, batchModel), Math.min(k, 3)));
        }
        List<String> load = configs.stream().map(ModelConfig::name).toList();
        start(configs, load, null);
        for (int i = 0; i < 4; i++) {
            Call bad = sendRequest(c.name(), nextTag(), failing, c.decoupled());
            awaitOrFail(bad);
            expectFailure(bad);
            Call good = send(c.name(), nextTag(), c.decoupled());
            awaitOrFail(good);
            expectSuccessAfter(good, bad);
        }
        if (inBatch) {
            int n = Math.min(k, 3);
            List<Call> calls = new ArrayList<>();
            Call bad = null;
            for (int i = 0; i < n; i++) {
                Call call = i == 1 ? sendRequest(batchModel, nextTag(), failing, c.decoupled()) : send(batchModel, nextTag(), c.decoupled());
                if (i == 1) {
                    bad = call;
                }
                calls.add(call);
            }
            for (Call call : calls) {
                awaitOrFail(call);
            }
            for (Call call : calls) {
                if (call == bad) {
                    expectFailure(call);
                } else {
                    expectSuccessAfter(call, bad);
                }
            }
        }
        expectReady(c.name());
        assertNoViolations();
    }

    /** B6: a request cancelled while it executes still ends exactly once; a backend that declares CANCELLATION ends it with CANCELLED. */
    @Test
    public void cancellation_duringExecute_endsTheRequestOnce() throws Exception {
        ModelConfig c = conformance.config();
        Gate gate = new Gate();
        start(List.of(c), List.of(c.name()), gate);
        Call call = newCall(c.name(), nextTag(), null, true);
        RequestHandle handle = host().stream(call.request, call);
        call.requestId = handle.id();
        awaitArrival(gate, call);
        boolean open = handle.cancel();
        gate.open();
        awaitOrFail(call);
        checkTerminals(call);
        Ledger.Rec rec = probe().ledger.byTag(call.tag);
        boolean endedCancelled = call.error != null && call.error.code() == ErrorCode.CANCELLED;
        boolean saw = rec != null && rec.sawCancelled;
        if (!open) {
            violation(Invariant.B6, describe(call) + " had already ended before execute began (" + call.outcome() + ")");
        } else if (caps.contains(Capability.CANCELLATION)) {
            if (!endedCancelled) {
                violation(Invariant.B6, describe(call) + " was cancelled before the backend's execute began and the backend declares CANCELLATION, but it"
                        + " ended with " + call.outcome() + (saw ? "" : " and the backend never called isCancelled()")
                        + "; check ScheduledRequest.isCancelled() and end the request with ErrorCode.CANCELLED");
            }
        } else if (endedCancelled && saw) {
            violation(Invariant.CAPABILITIES, describe(call) + ": the backend observed isCancelled() and ended the request with CANCELLED, but"
                    + " capabilities() lacks CANCELLATION; declare Capability.CANCELLATION");
        } else if (call.error == null) {
            checkResponse(call);
        }
        expectReady(c.name());
        assertNoViolations();
    }

    /** L7, L9: unload while requests execute and queue: each ends once, within the deadline; the model then reloads. */
    @Test
    public void unload_whileRequestsRun_endsEachOnce_withinTheDeadline_andReloads() throws Exception {
        ModelConfig c = conformance.config();
        Gate gate = new Gate();
        BackplaneHost h = start(List.of(c), List.of(c.name()), gate);
        Call first = send(c.name(), nextTag(), c.decoupled());
        awaitArrival(gate, first);
        List<Call> later = List.of(send(c.name(), nextTag(), c.decoupled()), send(c.name(), nextTag(), c.decoupled()));
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread unloader = kitThread("kit-unload", () -> {
            try {
                h.unload(c.name());
            } catch (Throwable t) {
                failed.set(t);
            }
        });
        waitUntil(() -> !h.isModelReady(c.name()), "model '" + c.name() + "' to start unloading");
        gate.open();
        probe().gate(null);
        unloader.join(unloadTimeout().plus(answerTimeout()));
        if (unloader.isAlive()) {
            failNow(Invariant.L7, "unloading model '" + c.name() + "' did not return within the unload deadline plus " + answerTimeout().toSeconds()
                    + " s; still executing: " + probe().executing);
        }
        if (failed.get() != null) {
            violation(Invariant.L7, "unloading model '" + c.name() + "' threw " + failed.get());
        }
        awaitOrFail(first);
        expectSuccess(first);
        for (Call call : later) {
            awaitOrFail(call);
            checkTerminals(call);
            if (call.error == null) {
                checkResponse(call);
            } else if (call.error.code() != ErrorCode.UNAVAILABLE) {
                violation(Invariant.L7, describe(call) + " was queued or executing when model '" + c.name() + "' unloaded and ended with "
                        + call.outcome() + "; expected its response, or UNAVAILABLE from the core");
            }
        }
        expectClosedAfterUnload(Invariant.L7, c.name());
        try {
            h.load(c.name());
        } catch (BackplaneException e) {
            failNow(Invariant.L9, "loading model '" + c.name() + "' again after it was unloaded failed: " + e.getMessage()
                    + " — release every resource of a model in Model.close()");
        }
        Call again = send(c.name(), nextTag(), c.decoupled());
        awaitOrFail(again);
        expectSuccess(again);
        assertNoViolations();
    }

    /** L9: reloads while callers keep sending: the old version serves until the swap, so no request fails. */
    @Test
    public void reload_whileRequestsRun_losesNoRequest() throws Exception {
        ModelConfig c = conformance.config();
        BackplaneHost h = start(List.of(c), List.of(c.name()), null);
        List<Call> calls = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> callers = startCallers(2, c, calls, stop);
        for (int i = 1; i <= 3; i++) {
            waitForCalls(calls, 2 * i);
            try {
                h.load(c.name());
            } catch (BackplaneException e) {
                violation(Invariant.L9, "reload #" + i + " of model '" + c.name() + "' failed while requests ran: " + e.getMessage()
                        + " — a new version loads beside the old one, so Backend.loadModel must work while the old Model is still open");
            }
        }
        waitForCalls(calls, 8);
        stop.set(true);
        joinAll(callers);
        for (Call call : List.copyOf(calls)) {
            awaitOrFail(call);
            // The core ends requests still queued on the old version at the swap with UNAVAILABLE (L7); anything else is the backend's.
            if (checkTerminals(call) && call.error != null && call.error.code() != ErrorCode.UNAVAILABLE) {
                violation(Invariant.L9, describe(call) + " ended with " + call.outcome() + " during a reload; the old version serves until the new"
                        + " one is ready and the swap is atomic, so a request gets its response (or UNAVAILABLE from the core)");
            } else if (call.error == null) {
                checkResponse(call);
            }
        }
        calls.clear();
        stop.set(false);
        callers = startCallers(2, c, calls, stop);
        for (int i = 0; i < 2; i++) {
            waitForCalls(calls, 2 * i + 1);
            h.unload(c.name());
            try {
                h.load(c.name());
            } catch (BackplaneException e) {
                violation(Invariant.L9, "loading model '" + c.name() + "' after unload #" + (i + 1) + " failed: " + e.getMessage());
            }
        }
        waitForCalls(calls, 6);
        stop.set(true);
        joinAll(callers);
        for (Call call : List.copyOf(calls)) {
            awaitOrFail(call);
            if (checkTerminals(call) && call.error != null && call.error.code() != ErrorCode.UNAVAILABLE) {
                violation(Invariant.L7, describe(call) + " ended with " + call.outcome() + " while the model was unloaded and loaded again;"
                        + " expected its response, or UNAVAILABLE from the core");
            } else if (call.error == null) {
                checkResponse(call);
            }
        }
        expectReady(c.name());
        assertNoViolations();
    }

    /** L1: many callers at once, two instances: each caller gets its own response, once. */
    @Test
    public void concurrentRequests_eachCallerGetsItsOwnResponse() throws Exception {
        ModelConfig c = withInstances(conformance.config(), 2);
        start(List.of(c), List.of(c.name()), null);
        int callers = concurrentCallers();
        int each = requestsPerCaller();
        CountDownLatch go = new CountDownLatch(1);
        List<Call> calls = new CopyOnWriteArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < callers; t++) {
            threads.add(kitThread("kit-caller-" + t, () -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < each; i++) {
                    calls.add(send(c.name(), nextTag(), c.decoupled() || i % 2 == 0));
                }
            }));
        }
        go.countDown();
        joinAll(threads);
        for (Call call : calls) {
            awaitOrFail(call);
            expectSuccess(call);
        }
        if (calls.size() != callers * each) {
            failNow(Invariant.L1, "only " + calls.size() + " of " + callers * each + " requests could be sent");
        }
        assertNoViolations();
    }

    /** L9 (loading): Backend.loadModel runs concurrently for different models; each serves, each unloads. */
    @Test
    public void concurrentModelLoads_eachModelServes() throws Exception {
        ModelConfig c = conformance.config();
        List<ModelConfig> configs = List.of(rename(c, c.name() + "_kit1"), rename(c, c.name() + "_kit2"), rename(c, c.name() + "_kit3"));
        BackplaneHost h = start(configs, List.of(), null);
        CountDownLatch go = new CountDownLatch(1);
        Map<String, Throwable> failures = Collections.synchronizedMap(new LinkedHashMap<>());
        List<Thread> loaders = new ArrayList<>();
        for (ModelConfig m : configs) {
            loaders.add(kitThread("kit-load-" + m.name(), () -> {
                try {
                    go.await();
                    h.load(m.name());
                } catch (Throwable t) {
                    failures.put(m.name(), t);
                }
            }));
        }
        go.countDown();
        joinAll(loaders);
        failures.forEach((m, t) -> violation(Invariant.L9, "loading model '" + m + "' concurrently with other models failed: " + t.getMessage()
                + " — Backend.loadModel may run concurrently for different models"));
        assertNoViolations();
        for (ModelConfig m : configs) {
            Call call = send(m.name(), nextTag(), c.decoupled());
            awaitOrFail(call);
            expectSuccess(call);
        }
        List<Thread> unloaders = new ArrayList<>();
        for (ModelConfig m : configs) {
            unloaders.add(kitThread("kit-unload-" + m.name(), () -> h.unload(m.name())));
        }
        joinAll(unloaders);
        expectClosedAfterUnload(Invariant.L7, "all");
        assertNoViolations();
    }

    /** L10: closing the host with a request executing and one queued ends both once and leaves nothing behind. */
    @Test
    public void close_withRequestsInFlight_leavesNothingBehind() throws Exception {
        ModelConfig c = conformance.config();
        Gate gate = new Gate();
        BackplaneHost h = start(List.of(c), List.of(c.name()), gate);
        Call executing = send(c.name(), nextTag(), c.decoupled());
        awaitArrival(gate, executing);
        Call queued = send(c.name(), nextTag(), c.decoupled());
        Thread closer = kitThread("kit-close", h::close);
        waitUntil(() -> !h.isLive(), "the host to start closing");
        gate.open();
        closer.join(unloadTimeout().plus(answerTimeout()));
        if (closer.isAlive()) {
            failNow(Invariant.L10, "closing the host did not return within the unload deadline plus " + answerTimeout().toSeconds() + " s; still"
                    + " executing: " + probe().executing);
        }
        for (Call call : List.of(executing, queued)) {
            awaitOrFail(call);
            if (checkTerminals(call) && call.error != null && call.error.code() != ErrorCode.UNAVAILABLE) {
                violation(Invariant.L10, describe(call) + " was in flight when the host closed and ended with " + call.outcome()
                        + "; expected its response, or UNAVAILABLE from the core");
            } else if (call.error == null) {
                checkResponse(call);
            }
        }
        closeAndCheckHygiene();
        assertNoViolations();
    }

    /** BATCHING: a batch of several requests, formed by the kit, is answered request by request. */
    @Test
    public void batching_multiRequestBatch_eachRequestAnsweredOnce() throws Exception {
        ModelConfig c = conformance.config();
        applicable(Capability.BATCHING, c.batches(), "its max_batch_size is 0; use a model with max_batch_size > 0 to verify BATCHING");
        int k = batchOf(4);
        if (k < 2) {
            Assumptions.abort("BATCHING not checked: max_batch_size " + c.maxBatchSize() + " leaves no room for two requests of the conformance model");
        }
        ModelConfig batched = withGateBatcher(c, k);
        start(List.of(batched), List.of(c.name()), null);
        List<Call> calls = new ArrayList<>();
        for (int i = 0; i < k; i++) {
            calls.add(send(c.name(), nextTag(), c.decoupled()));
        }
        for (Call call : calls) {
            awaitOrFail(call);
            expectSuccess(call);
        }
        for (Call call : calls) {
            Ledger.Rec rec = probe().ledger.byTag(call.tag);
            if (rec != null && rec.batchRequests != k) {
                failNow(Invariant.CAPABILITIES, describe(call) + " ran in a batch of " + rec.batchRequests + " requests, not " + k
                        + " as the kit's batcher formed it (a kit or core bug; please report it)");
            }
        }
        assertNoViolations();
    }

    /** STREAMING, DECOUPLED_STREAMING: concurrent streams each get their own responses and one terminal. */
    @Test
    public void streaming_concurrentStreams_eachEndsOnce() throws Exception {
        ModelConfig c = conformance.config();
        applicable(Capability.STREAMING, c.decoupled(), "it is not decoupled; add a test class with a decoupled model to verify STREAMING");
        start(List.of(c), List.of(c.name()), null);
        List<Call> calls = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            calls.add(send(c.name(), nextTag(), true));
        }
        boolean afterReturn = false;
        for (Call call : calls) {
            awaitOrFail(call);
            expectSuccess(call);
            Ledger.Rec rec = probe().ledger.byTag(call.tag);
            afterReturn |= rec != null && rec.sentAfterReturn;
            if (rec != null && rec.sentAfterReturn && !caps.contains(Capability.DECOUPLED_STREAMING)) {
                violation(Invariant.CAPABILITIES, describe(call) + " was answered after execute returned, but capabilities() lacks"
                        + " DECOUPLED_STREAMING; declare Capability.DECOUPLED_STREAMING");
            }
        }
        if (caps.contains(Capability.DECOUPLED_STREAMING) && !afterReturn) {
            violation(Invariant.CAPABILITIES, "the backend declares DECOUPLED_STREAMING but answered all " + calls.size()
                    + " requests inside execute; declare STREAMING instead, or answer from another thread after execute returns");
        }
        assertNoViolations();
    }

    /** GPU: instances of kind GPU are created and serve. */
    @Test
    public void gpu_instancesOfKindGpu_serve() throws Exception {
        ModelConfig c = conformance.config();
        applicable(Capability.GPU, usesGpu(c), "it has no instance group of KIND_GPU; use a model with one to verify GPU");
        start(List.of(c), List.of(c.name()), null);
        for (int i = 0; i < 3; i++) {
            Call call = send(c.name(), nextTag(), c.decoupled());
            awaitOrFail(call);
            expectSuccess(call);
        }
        if (!probe().instanceKinds.contains(InstanceKind.GPU)) {
            violation(Invariant.CAPABILITIES, "the backend declares GPU but created no instance of kind GPU (kinds: " + probe().instanceKinds + ")");
        }
        assertNoViolations();
    }

    /**
     * CAPABILITIES: a config asking for a capability the backend does not declare must fail to
     * load with UNSUPPORTED (or INVALID_ARGUMENT), never load and then behave otherwise.
     */
    @Test
    public void undeclaredCapabilities_failToLoad_withUnsupported() {
        ModelConfig c = conformance.config();
        Map<Capability, ModelConfig> asks = new LinkedHashMap<>();
        if (!caps.contains(Capability.STREAMING) && !c.decoupled()) {
            asks.put(Capability.STREAMING, rename(c, c.name() + "_kitstreaming").toBuilder().decoupled(true).build());
        }
        if (!caps.contains(Capability.BATCHING) && !c.batches()) {
            asks.put(Capability.BATCHING, rename(c, c.name() + "_kitbatching").toBuilder().maxBatchSize(4).build());
        }
        if (!caps.contains(Capability.GPU) && !usesGpu(c)) {
            asks.put(Capability.GPU, rename(c, c.name() + "_kitgpu").toBuilder().clearInstanceGroups()
                    .instanceGroup(InstanceGroup.of("kitgpu", 1, InstanceKind.GPU, List.of(0))).build());
        }
        if (asks.isEmpty()) {
            Assumptions.abort("not applicable: the backend declares every capability a model config can ask for (" + caps + ")");
        }
        BackplaneHost h = start(List.copyOf(asks.values()), List.of(), null);
        asks.forEach((cap, m) -> {
            try {
                h.load(m.name());
                violation(Invariant.CAPABILITIES, "model '" + m.name() + "' asks for " + cap + " (" + what(cap) + "), which the backend does not"
                        + " declare, and it loaded: refuse it in autoCompleteConfig or loadModel with BackplaneException(ErrorCode.UNSUPPORTED, ...),"
                        + " or declare Capability." + cap);
            } catch (BackplaneException e) {
                if (e.code() != ErrorCode.UNSUPPORTED && e.code() != ErrorCode.INVALID_ARGUMENT) {
                    violation(Invariant.CAPABILITIES, "model '" + m.name() + "' asks for " + cap + " (" + what(cap) + "), which the backend does not"
                            + " declare; its load failed with " + e.code() + " (" + e.getMessage() + "), expected UNSUPPORTED");
                }
            }
        });
        assertNoViolations();
    }

    // ---- lifecycle of each test ----

    @BeforeEach
    final void kitSetUp() {
        threadsBefore = Set.copyOf(Thread.getAllStackTraces().keySet());
        conformance = java.util.Objects.requireNonNull(model(), "model() returned null");
        caps = Collections.unmodifiableSet(Capability.closure(java.util.Objects.requireNonNull(capabilities(), "capabilities() returned null")));
        BackendFactory f = backend();
        backendName = f.name();
    }

    @AfterEach
    final void kitTearDown() {
        closeAndCheckHygiene();
        List<String> all = allViolations();
        if (all.size() > reported) {
            List<String> fresh = all.subList(reported, all.size());
            reported = all.size();
            fail(report(fresh));
        }
    }

    private void closeAndCheckHygiene() {
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
                    && !ignoreLeftoverThread(t);
            if (ours || fresh) {
                out.add(t);
            }
        }
        return out;
    }

    // ---- helpers ----

    private BackplaneHost start(List<ModelConfig> configs, List<String> load, @Nullable Gate gate) {
        Set<String> names = new LinkedHashSet<>();
        configs.forEach(m -> names.add(m.name()));
        Probe p = new Probe(conformance, names);
        p.gate(gate);
        probe = p;
        BackplaneHost.Builder b = BackplaneHost.builder().backend(p.wrap(backend())).batcher(new GateBatcher.Factory(gateBatch))
                .modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(unloadTimeout())
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(200));
        for (ModelConfig m : configs) {
            b.model(m);
        }
        load.forEach(b::loadModel);
        configureHost(b);
        b.callerRuns(false); // the kit holds batches at the door of execute (Gate): that needs the core's worker threads
        try {
            host = b.build();
        } catch (BackplaneException e) {
            failNow(Invariant.L9, "the host could not load model(s) " + load + " with backend '" + backendName + "': " + e.getMessage());
        }
        return host();
    }

    private BackplaneHost host() {
        BackplaneHost h = host;
        if (h == null) {
            throw new IllegalStateException("no host is running");
        }
        return h;
    }

    private Probe probe() {
        Probe p = probe;
        if (p == null) {
            throw new IllegalStateException("no probe");
        }
        return p;
    }

    private long nextTag() {
        return tags.incrementAndGet();
    }

    private Call send(String model, long tag, boolean stream) {
        return sendRequest(model, tag, conformance::request, stream);
    }

    private Call sendRequest(String model, long tag, LongFunction<InferenceRequest> maker, boolean stream) {
        Call call = newCall(model, tag, maker, stream);
        BackplaneHost h = host();
        if (stream) {
            call.requestId = h.stream(call.request, call).id();
        } else {
            h.infer(call.request).whenComplete(call::completed);
        }
        return call;
    }

    private Call newCall(String model, long tag, @Nullable LongFunction<InferenceRequest> maker, boolean stream) {
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

    /** The model batched by the kit's own batcher, which releases {@code requests} queued requests as one batch. */
    private ModelConfig withGateBatcher(ModelConfig c, int requests) {
        gateBatch = requests;
        return c.toBuilder().dynamicBatching(null).parameter("batcher", GateBatcher.NAME).build();
    }

    private static boolean usesGpu(ModelConfig c) {
        return c.instanceGroups().stream().anyMatch(g -> g.kind() == InstanceKind.GPU);
    }

    /** How many conformance requests fit in one batch, at most {@code limit}. */
    private int batchOf(int limit) {
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

    private static String what(Capability cap) {
        return switch (cap) {
            case STREAMING, DECOUPLED_STREAMING -> "decoupled: true";
            case BATCHING -> "max_batch_size: 4";
            case GPU -> "instance_group { kind: KIND_GPU }";
            case CANCELLATION -> "cancellation";
        };
    }

    private void applicable(Capability cap, boolean modelUsesIt, String whyNotForThisModel) {
        if (!caps.contains(cap)) {
            Assumptions.abort(cap + " not checked: the backend does not declare Capability." + cap
                    + " (undeclared capabilities are checked by undeclaredCapabilities_failToLoad_withUnsupported)");
        }
        if (!modelUsesIt) {
            Assumptions.abort(cap + " not checked with this conformance model: " + whyNotForThisModel);
        }
    }

    private void awaitArrival(Gate gate, Call call) throws InterruptedException {
        List<Long> batch = gate.arrived.poll(answerTimeout().toNanos(), TimeUnit.NANOSECONDS);
        if (batch == null) {
            failNow(Invariant.L1, describe(call) + " did not reach the backend's execute within " + answerTimeout().toSeconds() + " s ("
                    + call.outcome() + ")");
        }
    }

    private void awaitOrFail(Call call) throws InterruptedException {
        if (!call.await(answerTimeout())) {
            Ledger.Rec rec = probe().ledger.byTag(call.tag);
            String seen = rec == null ? "it never reached an instance" : "the backend sent " + rec.partials.get() + " response(s) and "
                    + rec.finals.get() + " FINAL(s)";
            failNow(Invariant.L1, describe(call) + " did not end within " + answerTimeout().toSeconds() + " s: " + seen
                    + "; every request must end with exactly one FINAL");
        }
    }

    /** One terminal, nothing after it; records an L1 violation and returns false otherwise. */
    private boolean checkTerminals(Call call) {
        int n = call.terminals.get();
        if (n != 1 || call.afterTerminal.get() > 0) {
            violation(Invariant.L1, describe(call) + " ended " + n + " times" + (call.afterTerminal.get() > 0 ? " and got "
                    + call.afterTerminal.get() + " response(s) after its end" : "") + "; every request ends exactly once");
            return false;
        }
        return true;
    }

    private void expectSuccess(Call call) {
        if (!checkTerminals(call)) {
            return;
        }
        if (call.error != null) {
            violation(Invariant.L1, describe(call) + ", a valid request, was not answered: it ended with " + call.outcome());
            return;
        }
        checkResponse(call);
    }

    private void expectSuccessAfter(Call good, @Nullable Call bad) {
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

    private void expectFailure(Call bad) {
        if (checkTerminals(bad) && bad.error == null) {
            violation(Invariant.L5, describe(bad) + " from failingRequest() succeeded; the backend must answer it with an error response"
                    + " (ResponseSender.sendError) so the kit can check that errors stay per request");
        }
    }

    private void checkResponse(Call call) {
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

    private void expectReady(String model) {
        if (!host().isModelReady(model)) {
            violation(Invariant.L8, "model '" + model + "' is not ready after its load returned: an instance's isReady() returned false"
                    + " (isReady must be true once createInstance returned a working instance)");
        }
    }

    private void expectClosedAfterUnload(Invariant inv, String model) {
        Probe p = probe();
        if (p.instancesClosed.get() != p.instancesCreated.get() || p.modelsClosed.get() != p.modelsLoaded.get()) {
            violation(inv, "after unloading model '" + model + "', " + p.instancesClosed.get() + " of " + p.instancesCreated.get()
                    + " instance(s) and " + p.modelsClosed.get() + " of " + p.modelsLoaded.get() + " model(s) were closed: close() did not return"
                    + " within the unload deadline");
        }
    }

    private String describe(Call call) {
        Probe p = probe;
        Ledger.Rec rec = p == null ? null : p.ledger.byTag(call.tag);
        if (rec != null) {
            return rec.describe();
        }
        return call.requestId > 0 ? Ledger.Rec.describe(call.requestId, Long.toString(call.tag)) : "the request with tag " + call.tag;
    }

    private List<Thread> startCallers(int n, ModelConfig c, List<Call> calls, AtomicBoolean stop) {
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < n; t++) {
            threads.add(kitThread("kit-caller-" + t, () -> {
                while (!stop.get()) {
                    Call call = send(c.name(), nextTag(), c.decoupled());
                    calls.add(call);
                    try {
                        if (!call.await(answerTimeout())) {
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

    private void waitForCalls(List<Call> calls, int n) {
        waitUntil(() -> {
            synchronized (calls) {
                return calls.stream().filter(x -> x.terminals.get() > 0).count() >= n;
            }
        }, n + " requests to end");
    }

    private void waitUntil(java.util.function.BooleanSupplier condition, String what) {
        try {
            Await.until(condition, answerTimeout(), what);
        } catch (AssertionError e) {
            failNow(Invariant.L1, e.getMessage());
        }
    }

    private Thread kitThread(String name, Runnable body) {
        return Thread.ofPlatform().name(name).daemon().start(() -> {
            try {
                body.run();
            } catch (Throwable t) {
                kitViolations.add("[kit] thread " + name + " failed: " + t);
            }
        });
    }

    private void joinAll(List<Thread> threads) throws InterruptedException {
        for (Thread t : threads) {
            t.join(answerTimeout().plus(unloadTimeout()));
            if (t.isAlive()) {
                failNow(Invariant.L1, "kit thread " + t.getName() + " is still waiting after " + answerTimeout().plus(unloadTimeout()).toSeconds()
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

    private void violation(Invariant invariant, String message) {
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

    private void assertNoViolations() {
        List<String> all = allViolations();
        if (all.size() > reported) {
            List<String> fresh = all.subList(reported, all.size());
            reported = all.size();
            fail(report(fresh));
        }
    }

    private void failNow(Invariant invariant, String message) {
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
