package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.LoadOverride;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model's instance count changes while it serves, in place: through a load whose config override
 * differs only in {@code instance_group} counts, and through the autoscaling policy in its
 * parameters. Eight clients with random timing send requests throughout; none fails, each ends
 * once, every retired instance is closed exactly once, no backend model is created again. The
 * tests synchronise on counters watched under one monitor (a handshake), never on sleeps; the
 * autoscaler's clock is the host's ticker, which the test moves.
 */
@Timeout(180)
class ElasticInstancesTest {
    private static final int CLIENTS = 8;

    @TempDir
    Path repo;

    private final ElasticBackend backend = new ElasticBackend();
    private final AtomicLong now = new AtomicLong(1_000_000_000L);
    private final AtomicInteger ended = new AtomicInteger();
    private final AtomicInteger instancesEvent = new AtomicInteger(-1);
    private @Nullable BackplaneHost host;
    private final List<Thread> clients = new ArrayList<>();
    private volatile boolean stop;
    /** The host's ticker is the system clock (the autoscaler's own thread decides), not the test's. */
    private boolean realClock;
    /** Inside the config's instance group (e.g. a {@code rate_limiter}); and whether the host's rate limiter is on. */
    private String groupExtra = "";
    private boolean rateLimited;
    private int perModelCap = HostOptions.Limits.DEFAULT_MAX_INSTANCES_PER_MODEL;
    private int perHostCap = HostOptions.Limits.DEFAULT_MAX_INSTANCES_PER_HOST;

    @AfterEach
    void closeAndCheckHygiene() throws InterruptedException {
        stopClients();
        if (host != null) {
            host.close();
        }
        assertEquals(Set.of(), backend.live, "instances left open");
        backend.closes.forEach((id, n) -> assertEquals(1, n.get(), "instance " + id + " closed " + n.get() + " times"));
        assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every backend model closed");
        Hygiene.assertNoBackplaneThreads();
    }

    private BackplaneHost start(String extra, String batching) throws IOException {
        Path dir = Files.createDirectories(repo.resolve("m"));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "m"
                backend: "elastic"
                max_batch_size: 4
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                instance_group [ { count: 1 kind: KIND_CPU %s } ]
                %s
                %s
                """.formatted(groupExtra, batching, extra));
        Files.createDirectories(dir.resolve("1"));
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .ticker(realClock ? io.backplane.spi.Ticker.system() : now::get)
                .rateLimit(rateLimited ? io.backplane.core.RateLimitMode.EXECUTION_COUNT : io.backplane.core.RateLimitMode.OFF)
                .unloadTimeout(Duration.ofSeconds(20)).maxInstancesPerModel(perModelCap).maxInstancesPerHost(perHostCap).listener(new HostListener() {
                    @Override
                    public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
                        ended.incrementAndGet();
                    }

                    @Override
                    public void instancesChanged(String model, long version, int instances) {
                        instancesEvent.set(instances);
                    }
                }).build();
        host.load("m");
        return host;
    }

    private static String override(int count, String extra) {
        return """
                {"name": "m", "backend": "elastic", "max_batch_size": 4,
                 "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
                 "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [1]}],
                 "instance_group": [{"count": %d, "kind": "KIND_CPU"}]%s}""".formatted(count, extra);
    }

    private ModelVersion version(BackplaneHost h) throws ReflectiveOperationException {
        return runtime(h).registry().route("m", 1);
    }

    private static HostRuntime runtime(BackplaneHost h) throws ReflectiveOperationException {
        var f = BackplaneHost.class.getDeclaredField("runtime");
        f.setAccessible(true);
        return (HostRuntime) f.get(h);
    }

    /** Clients: each sends a request, waits for it, and goes on until told to stop; a failure is recorded. */
    private final AtomicInteger sent = new AtomicInteger();
    /** Requests the host accepted (infer returned): queued or running until they end. */
    private final AtomicInteger admitted = new AtomicInteger();
    private final AtomicInteger succeeded = new AtomicInteger();
    private final List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());

    private void startClients(BackplaneHost h) {
        for (int c = 0; c < CLIENTS; c++) {
            int client = c;
            Thread t = Thread.ofPlatform().name("client-" + c).start(() -> {
                long tag = client * 1_000_000L;
                while (!stop) {
                    backend.pauseClients.run(); // a handshake between phases of the autoscaler test; nothing otherwise
                    if (stop) {
                        break;
                    }
                    InferenceRequest r = InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 1}, ++tag)).build();
                    sent.incrementAndGet();
                    backend.signal();
                    try {
                        var future = h.infer(r);
                        admitted.incrementAndGet();
                        backend.signal();
                        InferenceResponse out = future.get(60, TimeUnit.SECONDS);
                        assertEquals(tag, out.output("OUT").toLongArray()[0]);
                        succeeded.incrementAndGet();
                    } catch (Throwable x) {
                        failures.add(x);
                    }
                    backend.signal();
                    if (ThreadLocalRandom.current().nextInt(4) == 0) {
                        LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(50_000)); // random timing, not synchronisation
                    }
                }
            });
            clients.add(t);
        }
    }

    private void stopClients() throws InterruptedException {
        stop = true;
        backend.open();
        backend.resumeClients();
        for (Thread t : clients) {
            t.join();
        }
        clients.clear();
    }

    private void assertCleanRun() {
        assertEquals(List.of(), failures.stream().map(Throwable::toString).toList(), "no request failed");
        assertEquals(sent.get(), succeeded.get(), "every request answered");
        assertEquals(sent.get(), ended.get(), "every request ended exactly once");
    }

    /** The host's caps count instances as they change: over a cap, the change is refused and nothing changes. */
    @Test
    void overrideLoad_overTheInstanceCaps_refusedNamingTheLimit_nothingChanges() throws Exception {
        perModelCap = 3;
        perHostCap = 3; // tight: raising the count again works only if the retired instances gave their places back
        BackplaneHost h = start("", "");
        ModelVersion v = version(h);

        BackplaneException perModel = assertThrows(BackplaneException.class, () -> h.load("m", new LoadOverride(override(4, ""), Map.of())));

        assertEquals(ErrorCode.INVALID_ARGUMENT, perModel.code(), perModel.getMessage());
        assertTrue(perModel.getMessage().contains("asks for 4 instances (instance_group count), over the limit of 3 per model"), perModel.getMessage());
        assertEquals(1, v.instanceCount());
        assertEquals(1, backend.live.size());
        h.load("m", new LoadOverride(override(3, ""), Map.of()));
        assertEquals(3, v.instanceCount(), "within the caps");
        h.load("m", new LoadOverride(override(1, ""), Map.of()));
        assertEquals(1, v.instanceCount());
        h.load("m", new LoadOverride(override(3, ""), Map.of()));
        assertEquals(3, v.instanceCount(), "retired instances gave their places back");
        assertTrue(version(h) == v);
        assertEquals(3, backend.live.size());
    }

    @Test
    void overrideLoad_countsOnly_changesInstancesInPlace_1to4to1_underLoad_noRequestFails() throws Exception {
        BackplaneHost h = start("", "");
        ModelVersion v = version(h);
        startClients(h);
        int[] counts = {4, 1, 3, 2, 4, 1, 4, 1};
        for (int round = 0; round < counts.length; round++) {
            int target = counts[round];
            int before = sent.get();
            backend.await(() -> sent.get() >= before + CLIENTS); // requests are flowing when the change starts

            h.load("m", new LoadOverride(override(target, ""), Map.of()));

            assertEquals(target, v.instanceCount(), "round " + round);
            assertEquals(target, backend.live.size(), "round " + round + ": retired instances closed, new ones serving");
            assertEquals(target, h.modelConfig("m", 1).instanceGroups().getFirst().count(), "the config shows the live count");
            assertTrue(version(h) == v, "the same version serves: nothing reloaded");
            assertEquals(target, h.statistics("m", 1).getFirst().instances(), "the statistics show the live count");
            assertEquals(target, instancesEvent.get(), "the listeners were told");
        }
        int last = sent.get();
        backend.await(() -> sent.get() >= last + CLIENTS);
        stopClients();
        assertEquals(1, backend.modelsLoaded.get(), "one backend model for the whole run");
        assertCleanRun();
        assertTrue(backend.closes.size() > 10, "instances came and went: " + backend.closes.size());
        backend.closes.forEach((id, n) -> assertTrue(n.get() <= 1, "instance " + id + " closed " + n.get() + " times"));
    }

    /**
     * A group with a {@code rate_limiter}: instances added in place wait for the resource like those
     * made at load (one global copy: never two executes at once, however many instances), and
     * retired ones leave the limiter.
     */
    @Test
    void overrideLoad_rateLimitedGroup_addedInstancesShareTheResource_retiredOnesLeaveTheLimiter() throws Exception {
        rateLimited = true;
        groupExtra = "rate_limiter { resources [ { name: \"R\" global: true count: 1 } ] }";
        String limiter = ", \"rate_limiter\": {\"resources\": [{\"name\": \"R\", \"global\": true, \"count\": 1}]}";
        BackplaneHost h = start("", "");
        ModelVersion v = version(h);
        RateLimiter limiterOfHost = runtime(h).context().rateLimiter();
        assertEquals(1, limiterOfHost.registered());
        startClients(h);
        for (int target : new int[] {4, 1, 3, 1}) {
            int before = sent.get();
            backend.await(() -> sent.get() >= before + CLIENTS);

            h.load("m", new LoadOverride(override(target, "").replace("\"KIND_CPU\"}", "\"KIND_CPU\"" + limiter + "}"), Map.of()));

            assertTrue(version(h) == v, "the same version serves: nothing reloaded");
            assertEquals(target, v.instanceCount());
            assertEquals(target, limiterOfHost.registered(), "one gate per serving instance");
        }
        int last = sent.get();
        backend.await(() -> sent.get() >= last + 4 * CLIENTS);
        stopClients();
        assertCleanRun();
        assertEquals(1, backend.maxInside.get(), "one copy of R: never two executes at once");
    }

    @Test
    void overrideLoad_otherDifference_stillReloads() throws Exception {
        BackplaneHost h = start("", "");
        ModelVersion v = version(h);

        h.load("m", new LoadOverride(override(2, ", \"parameters\": {\"k\": {\"string_value\": \"v\"}}"), Map.of()));

        assertFalse(version(h) == v, "a new version object: reloaded");
        assertEquals(2, backend.modelsLoaded.get());
        assertEquals(2, backend.live.size());
    }

    @Test
    void autoscaler_1to4to1_repeatedly_underLoad_noRequestFails() throws Exception {
        BackplaneHost h = start("""
                parameters [ { key: "autoscale_min_instances" value { string_value: "1" } },
                             { key: "autoscale_max_instances" value { string_value: "4" } },
                             { key: "autoscale_queue_depth" value { string_value: "1" } },
                             { key: "autoscale_idle_ms" value { string_value: "50" } },
                             { key: "autoscale_interval_ms" value { string_value: "3600000" } } ]""", "");
        ModelVersion v = version(h);
        startClients(h);
        for (int cycle = 0; cycle < 3; cycle++) {
            // up: executes held, so with 8 clients and at most 4 instances requests wait in the queue
            backend.close();
            for (int n = 1; n < 4; n++) {
                int count = n;
                backend.await(() -> admitted.get() - succeeded.get() - failures.size() == CLIENTS && backend.executing.get() == count);
                assertEquals(1, v.autoscaleOnce(), "cycle " + cycle + ": queue deep with " + count + " instance(s): one more");
                assertEquals(count + 1, v.instanceCount());
            }
            backend.await(() -> backend.executing.get() == 4);
            assertEquals(0, v.autoscaleOnce(), "at the maximum: no more");
            // down: executes run again, clients go on for a while, then pause; idle checks retire one at a time
            backend.open();
            int before = sent.get();
            backend.await(() -> sent.get() >= before + 4 * CLIENTS);
            backend.pauseClients();
            backend.await(() -> backend.paused.get() == CLIENTS && sent.get() == succeeded.get() + failures.size());
            for (int n = 4; n > 1; n--) {
                assertEquals(0, v.autoscaleOnce(), "first idle check only starts the idle time");
                now.addAndGet(TimeUnit.MILLISECONDS.toNanos(50));
                assertEquals(-1, v.autoscaleOnce(), "idle for autoscale_idle_ms: one fewer");
                assertEquals(n - 1, v.instanceCount());
                assertEquals(n - 1, backend.live.size(), "the retired instance closed");
            }
            now.addAndGet(TimeUnit.MILLISECONDS.toNanos(50));
            assertEquals(0, v.autoscaleOnce(), "at the minimum: no fewer");
            backend.resumeClients();
        }
        stopClients();
        assertEquals(1, backend.modelsLoaded.get());
        assertEquals(1, v.instanceCount());
        assertCleanRun();
    }

    /** The autoscaler's own thread, checking every millisecond: up to the maximum while requests wait, down to the minimum once idle. */
    @Test
    void autoscalerThread_addsWhileRequestsWait_retiresWhenIdle() throws Exception {
        realClock = true;
        BackplaneHost h = start("""
                parameters [ { key: "autoscale_min_instances" value { string_value: "1" } },
                             { key: "autoscale_max_instances" value { string_value: "3" } },
                             { key: "autoscale_idle_ms" value { string_value: "1" } },
                             { key: "autoscale_interval_ms" value { string_value: "1" } } ]""", ""); // batches of one: held executes leave the rest queued
        ModelVersion v = version(h);
        backend.close();
        startClients(h);
        backend.await(() -> v.instanceCount() == 3 && backend.executing.get() == 3);
        backend.open();
        int before = sent.get();
        backend.await(() -> sent.get() >= before + 4 * CLIENTS);
        stopClients();
        backend.await(() -> v.instanceCount() == 1 && backend.live.size() == 1);
        assertCleanRun();
    }

    @Test
    void newInstanceFailingToStart_isLogged_modelServesOnTheOthers() throws Exception {
        BackplaneHost h = start("", "");
        startClients(h);
        backend.failCreates.set(2);

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("m", new LoadOverride(override(4, ""), Map.of())));

        assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("2 of the 3 new instance(s) failed to start") && e.getMessage().contains("serves on 2"), e.getMessage());
        assertEquals(2, version(h).instanceCount());
        assertEquals(2, h.modelConfig("m", 1).instanceGroups().getFirst().count());
        assertTrue(h.isModelReady("m"));
        int before = sent.get();
        backend.await(() -> sent.get() >= before + 2 * CLIENTS);
        stopClients();
        assertCleanRun();
    }

    @Test
    void unload_racingAnInstanceChange_endsWithinItsDeadline_andClosesEverything() throws Exception {
        BackplaneHost h = start("", "");
        ModelVersion v = version(h);
        startClients(h);
        for (int round = 0; round < 4; round++) {
            if (round > 0) {
                h.load("m");
                v = version(h);
            }
            backend.creating = new CountDownLatch(1);
            backend.holdCreate = new CountDownLatch(1);
            ModelVersion serving = v;
            Thread changer = Thread.ofPlatform().start(() -> {
                try {
                    serving.resize(serving.config().toBuilder().instanceGroups(List.of(serving.config().instanceGroups().getFirst().toBuilder()
                            .count(4).build())).build());
                } catch (BackplaneException x) {
                    // cancelled by the unload, or it ended first: either is right
                }
            });
            assertTrue(backend.creating.await(30, TimeUnit.SECONDS), "a new instance is starting");

            h.unload("m"); // interrupts the start held in createInstance

            changer.join();
            backend.creating = null;
            assertEquals(0, instancesEvent.get(), "an unloaded version has no instance");
            assertFalse(h.isModelReady("m"));
            assertEquals(Set.of(), backend.live, "round " + round + ": every instance closed");
        }
        stopClients();
        // clients saw UNAVAILABLE while it was unloaded; each request still ended, once
        assertEquals(sent.get(), succeeded.get() + failures.size());
        assertTrue(ended.get() <= sent.get(), ended.get() + " ends for " + sent.get() + " requests");
        assertEquals(0, h.openRequests(), "no request left open");
    }

    /**
     * The race: a load lowers the count 4 → 1 while the instances to retire are inside execute
     * (held), so the change waits for them; an unload comes. It cancels the change (its thread is
     * the registry's loader), waits for the held requests (released once the model reports not
     * ready), and finalizes every instance, the retiring ones included, each once.
     */
    @Test
    void unload_racingARetirement_cancelsIt_andFinalizesEveryInstanceOnce() throws Exception {
        BackplaneHost h = start("", "");
        h.load("m", new LoadOverride(override(4, ""), Map.of()));
        backend.close();
        startClients(h);
        backend.await(() -> backend.executing.get() == 4);
        java.util.concurrent.atomic.AtomicReference<@Nullable BackplaneException> lowered = new java.util.concurrent.atomic.AtomicReference<>();
        Thread lowering = Thread.ofPlatform().start(() -> {
            try {
                h.load("m", new LoadOverride(override(1, ""), Map.of()));
            } catch (BackplaneException x) {
                lowered.set(x);
            }
        });
        backend.await(() -> java.util.Arrays.stream(lowering.getStackTrace()).anyMatch(f -> f.getMethodName().equals("retire")));
        Thread unloading = Thread.ofPlatform().start(() -> h.unload("m"));
        backend.await(() -> !h.isModelReady("m"));
        backend.open(); // the held requests finish: the unload's drain ends
        unloading.join();
        lowering.join();
        stopClients();
        // the retirement waited on held executes that only the unload's drain let go: the unload had to cancel it
        BackplaneException cancelled = lowered.get();
        assertTrue(cancelled != null && cancelled.code() == ErrorCode.CANCELLED, String.valueOf(cancelled));
        assertEquals(Set.of(), backend.live, "every instance closed");
        assertEquals(0, h.openRequests());
        assertEquals(0, instancesEvent.get());
        assertEquals(1, backend.modelsLoaded.get());
        assertEquals(1, backend.modelsClosed.get());
    }

    /** Whether {@code t} is now inside a method named {@code method} (a handshake on where a change waits). */
    private static boolean inside(Thread t, String method) {
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getMethodName().equals(method)) {
                return true;
            }
        }
        return false;
    }

    /**
     * A rate-limited instance that took a batch and waits for a resource another instance holds is
     * retired (the idle one goes first): it keeps its batch, waits on for the resource and runs it;
     * no request fails.
     */
    @Test
    void retire_instanceWaitingForItsResources_runsTheBatchItTook() throws Exception {
        rateLimited = true;
        groupExtra = "rate_limiter { resources [ { name: \"R\" global: true count: 1 } ] }";
        String limiter = ", \"rate_limiter\": {\"resources\": [{\"name\": \"R\", \"global\": true, \"count\": 1}]}";
        BackplaneHost h = start("", "");
        h.load("m", new LoadOverride(override(2, "").replace("\"KIND_CPU\"}", "\"KIND_CPU\"" + limiter + "}"), Map.of()));
        ModelVersion v = version(h);
        assertEquals(2, v.instanceCount());
        backend.close();
        var first = h.infer(InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 1}, 1)).build());
        backend.await(() -> backend.executing.get() == 1); // it holds R, inside a held execute
        var second = h.infer(InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 1}, 2)).build());
        // taken from the queue by the other instance, whose worker now waits for R
        backend.await(() -> v.openRequests().size() == 2 && v.openRequests().stream().noneMatch(r -> r.phase() == RequestState.QUEUED));

        var lowering = new java.util.concurrent.CompletableFuture<Void>();
        Thread t = Thread.ofPlatform().name("lowering").start(() -> {
            try {
                h.load("m", new LoadOverride(override(1, "").replace("\"KIND_CPU\"}", "\"KIND_CPU\"" + limiter + "}"), Map.of()));
                lowering.complete(null);
            } catch (Throwable x) {
                lowering.completeExceptionally(x);
            }
        });
        backend.await(() -> lowering.isDone() || inside(t, "retire"));
        backend.open();
        t.join();

        lowering.get(); // no error
        assertEquals(1, first.get(60, TimeUnit.SECONDS).output("OUT").toLongArray()[0]);
        assertEquals(2, second.get(60, TimeUnit.SECONDS).output("OUT").toLongArray()[0], "the batch the retired instance took ran");
        assertEquals(1, v.instanceCount());
        assertEquals(1, backend.live.size());
        assertEquals(1, runtime(h).context().rateLimiter().registered());
    }

    /**
     * A decoupled instance whose execute returned while its streams go on is retired: the change
     * waits for those streams to send FINAL before it closes the instance, and every stream ends well.
     */
    @Test
    void retire_decoupledInstanceWithOpenStreams_closesItOnlyAfterTheirFinal() throws Exception {
        String decoupled = ", \"model_transaction_policy\": {\"decoupled\": true}";
        BackplaneHost h = start("model_transaction_policy { decoupled: true }", "");
        h.load("m", new LoadOverride(override(2, decoupled), Map.of()));
        ModelVersion v = version(h);
        backend.streamLater = true;
        backend.close();
        List<java.util.concurrent.CompletableFuture<Integer>> ends = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            var end = new java.util.concurrent.CompletableFuture<Integer>();
            var partials = new AtomicInteger();
            h.stream(InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 1}, i)).build(), new io.backplane.spi.host.ResponseObserver() {
                @Override
                public void onResponse(InferenceResponse response) {
                    partials.incrementAndGet();
                }

                @Override
                public void onComplete() {
                    end.complete(partials.get());
                }

                @Override
                public void onError(BackplaneException error) {
                    end.completeExceptionally(error);
                }
            });
            ends.add(end);
            int inside = i + 1;
            backend.await(() -> backend.executing.get() == inside); // one request on each instance
        }
        backend.open();
        backend.await(() -> backend.streams.values().stream().mapToInt(List::size).sum() == 2); // both executes returned; both stream on

        var lowering = new java.util.concurrent.CompletableFuture<Void>();
        Thread t = Thread.ofPlatform().name("lowering").start(() -> {
            try {
                h.load("m", new LoadOverride(override(1, decoupled), Map.of()));
                lowering.complete(null);
            } catch (Throwable x) {
                lowering.completeExceptionally(x);
            }
        });
        backend.await(() -> lowering.isDone() || inside(t, "awaitStreams"));
        assertEquals(List.of(), backend.violations, "no instance closed under an open stream");
        assertEquals(2, backend.live.size(), "the retiring instance waits for its stream");
        backend.endStreams();
        t.join();

        lowering.get();
        for (var end : ends) {
            assertEquals(1, end.get(60, TimeUnit.SECONDS), "each stream got its partial and ended well");
        }
        assertEquals(List.of(), backend.violations);
        assertEquals(1, v.instanceCount());
        assertEquals(1, backend.live.size());
    }

    /** An in-place count outside the autoscaling bounds is refused naming them; nothing changes. */
    @Test
    void overrideLoad_countOutsideTheAutoscaleBounds_refused_nothingChanges() throws Exception {
        String params = """
                parameters [ { key: "autoscale_min_instances" value { string_value: "1" } },
                             { key: "autoscale_max_instances" value { string_value: "2" } },
                             { key: "autoscale_interval_ms" value { string_value: "3600000" } } ]""";
        String json = ", \"parameters\": {\"autoscale_min_instances\": {\"string_value\": \"1\"}, \"autoscale_max_instances\": {\"string_value\": \"2\"},"
                + " \"autoscale_interval_ms\": {\"string_value\": \"3600000\"}}";
        BackplaneHost h = start(params, "");
        ModelVersion v = version(h);
        h.load("m", new LoadOverride(override(2, json), Map.of()));
        assertTrue(version(h) == v, "changed in place");
        assertEquals(2, v.instanceCount());

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("m", new LoadOverride(override(3, json), Map.of())));

        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("the instance_group count 3 is outside autoscale_min_instances 1 .. autoscale_max_instances 2; give a count from 1 to 2"),
                e.getMessage());
        assertTrue(version(h) == v);
        assertEquals(2, v.instanceCount());
        assertEquals(2, backend.live.size());
    }

    @Test
    void badAutoscaleParameters_rejectedNamingTheParameterTheValueAndWhatToGive() throws Exception {
        BackplaneHost h = start("", "");
        String[][] cases = {
            {"\"autoscale_min_instances\": {\"string_value\": \"1\"}", "needs both autoscale_min_instances and autoscale_max_instances"},
            {"\"autoscale_min_instances\": {\"string_value\": \"0\"}, \"autoscale_max_instances\": {\"string_value\": \"4\"}",
                "parameter autoscale_min_instances is '0'; give a whole number of instances from 1"},
            {"\"autoscale_min_instances\": {\"string_value\": \"3\"}, \"autoscale_max_instances\": {\"string_value\": \"2\"}",
                "parameter autoscale_max_instances is '2'; give a whole number of instances from autoscale_min_instances (3)"},
            {"\"autoscale_min_instances\": {\"string_value\": \"1\"}, \"autoscale_max_instances\": {\"string_value\": \"4\"},"
                + " \"autoscale_idle_ms\": {\"string_value\": \"soon\"}", "parameter autoscale_idle_ms is 'soon'; give a whole number of milliseconds"},
            {"\"autoscale_min_instances\": {\"string_value\": \"2\"}, \"autoscale_max_instances\": {\"string_value\": \"4\"}",
                "the instance_group count 1 is outside autoscale_min_instances 2 .. autoscale_max_instances 4"},
            {"\"autoscale_min_instances\": {\"string_value\": \"1\"}, \"autoscale_max_instances\": {\"string_value\": \"4\"},"
                + " \"autoscale_queue_depth\": {\"string_value\": \"0\"}", "are both 0, so nothing would ever add an instance"},
        };
        for (String[] c : cases) {
            BackplaneException e = assertThrows(BackplaneException.class,
                    () -> h.load("m", new LoadOverride(override(1, ", \"parameters\": {" + c[0] + "}"), Map.of())));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains(c[1]), "expected '" + c[1] + "' in: " + e.getMessage());
            assertTrue(h.isModelReady("m"), "the serving version serves on");
        }
    }

    /**
     * Instances echo IN as OUT; each has an id and counts its closes. {@code close()} holds every
     * execute until {@code open()}; {@code failCreates} fails that many starts; {@code creating}
     * and {@code holdCreate} hold a start (interruptibly).
     */
    private static final class ElasticBackend implements BackendFactory {
        final Set<Integer> live = ConcurrentHashMap.newKeySet();
        final Map<Integer, AtomicInteger> closes = new ConcurrentHashMap<>();
        final AtomicInteger modelsLoaded = new AtomicInteger();
        final AtomicInteger modelsClosed = new AtomicInteger();
        final AtomicInteger executing = new AtomicInteger();
        /** Executes running at once, over the whole execute; and the most seen. */
        final AtomicInteger inside = new AtomicInteger();
        final AtomicInteger maxInside = new AtomicInteger();
        final AtomicInteger failCreates = new AtomicInteger();
        final AtomicInteger paused = new AtomicInteger();
        volatile @Nullable CountDownLatch creating;
        /** Decoupled: execute returns without answering; the test ends the streams ({@link #endStreams}). */
        volatile boolean streamLater;
        /** Streams still open, by instance id; and what an instance closed with streams open saw. */
        final Map<Integer, List<ScheduledRequest>> streams = new ConcurrentHashMap<>();
        final List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
        volatile CountDownLatch holdCreate = new CountDownLatch(0);
        private final AtomicInteger serial = new AtomicInteger();
        private final Object monitor = new Object();
        private boolean held;
        private boolean pausing;

        /** Sends each open stream a partial response and its FINAL, as a decoupled model ends its streams. */
        void endStreams() {
            for (List<ScheduledRequest> open : streams.values()) {
                for (ScheduledRequest r : List.copyOf(open)) {
                    Tensor in = r.request().input("IN");
                    r.sender().send(InferenceResponse.of(List.of(in.withName("OUT"))), 0);
                    open.remove(r);
                    r.sender().send(null, io.backplane.spi.ResponseSender.FINAL);
                }
            }
        }

        /** Wakes whoever waits in {@link #await}. */
        void signal() {
            synchronized (monitor) {
                monitor.notifyAll();
            }
        }

        /** Waits (on the monitor, woken by every event) until {@code condition} holds; fails after 60 s. */
        void await(BooleanSupplier condition) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            synchronized (monitor) {
                while (!condition.getAsBoolean()) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw new AssertionError("the condition did not come true within 60 s");
                    }
                    TimeUnit.NANOSECONDS.timedWait(monitor, Math.min(left, TimeUnit.MILLISECONDS.toNanos(50)));
                }
            }
        }

        void close() {
            synchronized (monitor) {
                held = true;
            }
        }

        void open() {
            synchronized (monitor) {
                held = false;
                monitor.notifyAll();
            }
        }

        void pauseClients() {
            synchronized (monitor) {
                pausing = true;
            }
        }

        void resumeClients() {
            synchronized (monitor) {
                pausing = false;
                monitor.notifyAll();
            }
        }

        /** Where each client waits while the clients are paused. */
        final Runnable pauseClients = () -> {
            synchronized (monitor) {
                if (!pausing) {
                    return;
                }
                paused.incrementAndGet();
                monitor.notifyAll();
                while (pausing) {
                    try {
                        monitor.wait();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                paused.decrementAndGet();
            }
        };

        @Override
        public String name() {
            return "elastic";
        }

        @Override
        public Backend create(BackendContext context) {
            return new Backend() {
                @Override
                public Model loadModel(ModelContext ctx) {
                    modelsLoaded.incrementAndGet();
                    return new Model() {
                        @Override
                        public ModelInstance createInstance(InstanceContext ictx) throws Exception {
                            CountDownLatch c = creating;
                            if (c != null) {
                                c.countDown();
                                holdCreate.await(); // an unload interrupts it
                            }
                            if (failCreates.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                                throw new IllegalStateException("instance '" + ictx.name() + "' cannot start (test)");
                            }
                            int id = serial.incrementAndGet();
                            live.add(id);
                            closes.put(id, new AtomicInteger());
                            return new ModelInstance() {
                                @Override
                                public void execute(List<ScheduledRequest> batch) throws Exception {
                                    maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                                    try {
                                        run(batch);
                                    } finally {
                                        inside.decrementAndGet();
                                    }
                                }

                                private void run(List<ScheduledRequest> batch) throws Exception {
                                    synchronized (monitor) {
                                        executing.incrementAndGet();
                                        monitor.notifyAll();
                                        while (held) {
                                            monitor.wait();
                                        }
                                        executing.decrementAndGet();
                                    }
                                    if (ThreadLocalRandom.current().nextBoolean()) {
                                        LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(100_000)); // random timing
                                    }
                                    if (streamLater) {
                                        streams.computeIfAbsent(id, k -> new java.util.concurrent.CopyOnWriteArrayList<>()).addAll(batch);
                                        signal();
                                        return;
                                    }
                                    for (ScheduledRequest r : batch) {
                                        Tensor in = r.request().input("IN");
                                        r.sender().sendFinal(InferenceResponse.of(List.of(in.withName("OUT"))));
                                    }
                                }

                                @Override
                                public void close() {
                                    List<ScheduledRequest> open = streams.getOrDefault(id, List.of());
                                    if (!open.isEmpty()) {
                                        violations.add("instance " + id + " closed with " + open.size() + " stream(s) open");
                                    }
                                    closes.get(id).incrementAndGet();
                                    live.remove(id);
                                }
                            };
                        }

                        @Override
                        public void close() {
                            modelsClosed.incrementAndGet();
                        }
                    };
                }

                @Override
                public void close() {
                }
            };
        }
    }
}
