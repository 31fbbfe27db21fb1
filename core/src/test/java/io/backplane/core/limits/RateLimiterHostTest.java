package io.backplane.core.limits;

import static io.backplane.core.testing.ScriptedBackend.model;
import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.RateLimitMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.RateLimiterConfig;
import io.backplane.spi.config.RateLimiterConfig.Resource;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Triton's rate limiter through the host: instances of different models that share a resource,
 * many client threads, random execute lengths; priorities; off mode; load errors; unload and
 * cancellation while a batch waits for resources (L1, L7).
 */
@Timeout(120)
class RateLimiterHostTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    /** Counted down each time a request of "waiter" leaves the queue (dispatched to a worker, then waiting on the limiter). */
    private final CountDownLatch waiterDispatched = new CountDownLatch(1);
    private BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private BackplaneHost.Builder builder(RateLimitMode mode) {
        return BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .rateLimit(mode).listener(new HostListener() {
                    @Override
                    public void requestLeftQueue(String model, long version) {
                        if (model.equals("waiter")) {
                            waiterDispatched.countDown();
                        }
                    }
                });
    }

    private static ModelConfig limited(String name, int instances, int priority, Resource... resources) {
        return limitedOn(name, instances, InstanceKind.CPU, List.of(), priority, resources);
    }

    private static ModelConfig limitedOn(String name, int instances, InstanceKind kind, List<Integer> gpus, int priority, Resource... resources) {
        return model(name, false).toBuilder().instanceGroups(List.of(InstanceGroup.builder(name + "_group").count(instances).kind(kind).gpus(gpus)
                .rateLimiter(RateLimiterConfig.of(List.of(resources), priority)).build())).build();
    }

    /** Tracks how many executes of the scripted models run at once. */
    private static final class Concurrency implements ScriptedBackend.Script {
        final AtomicInteger inside = new AtomicInteger();
        final AtomicInteger max = new AtomicInteger();
        final AtomicLong executions = new AtomicLong();

        @Override
        public void execute(List<ScheduledRequest> batch, io.backplane.spi.InstanceContext instance) throws Exception {
            max.accumulateAndGet(inside.incrementAndGet(), Math::max);
            try {
                executions.incrementAndGet();
                int spins = ThreadLocalRandom.current().nextInt(0, 2_000);
                for (int i = 0; i < spins; i++) {
                    if (i % 256 == 0) {
                        Thread.yield();
                    }
                    Thread.onSpinWait();
                }
            } finally {
                inside.decrementAndGet();
            }
            ScriptedBackend.ECHO.execute(batch, instance);
        }
    }

    /** {@code threads} clients send {@code perThread} requests each to the given models at random and check each answer is their own. */
    private void load(List<String> models, int threads, int perThread) throws Exception {
        CountDownLatch start = new CountDownLatch(1);
        List<CompletableFuture<Void>> clients = new ArrayList<>();
        AtomicLong tags = new AtomicLong();
        for (int t = 0; t < threads; t++) {
            clients.add(CompletableFuture.runAsync(() -> {
                try {
                    start.await();
                    for (int i = 0; i < perThread; i++) {
                        long tag = tags.incrementAndGet();
                        String m = models.get(ThreadLocalRandom.current().nextInt(models.size()));
                        assertEquals(tag, tagOf(host.infer(request(m, tag)).get(30, TimeUnit.SECONDS)));
                    }
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, runnable -> Thread.ofPlatform().start(runnable)));
        }
        start.countDown();
        for (CompletableFuture<Void> c : clients) {
            c.get(60, TimeUnit.SECONDS);
        }
    }

    @Test
    void globalCountOne_twoModels_neverExecuteAtOnce() throws Exception {
        Concurrency c = new Concurrency();
        backend.on("a", c).on("b", c);
        host = builder(RateLimitMode.EXECUTION_COUNT).model(limited("a", 2, 1, Resource.of("R", true, 1)))
                .model(limited("b", 2, 1, Resource.of("R", true, 1))).loadModel("a").loadModel("b").build();
        load(List.of("a", "b"), 8, 150);
        assertEquals(1, c.max.get(), "executes at once with one copy of R");
        assertEquals(8 * 150, c.executions.get());
    }

    /**
     * Dynamic batching (batches of several requests, a queue delay): a worker staged as its last
     * execute ended only takes a batch already formed, and drops its claim when there is none; still
     * one execute at a time, every answer its caller's own.
     */
    @Test
    void dynamicBatching_countOne_neverTogether_everyAnswerOwn() throws Exception {
        Concurrency c = new Concurrency();
        backend.on("a", c).on("b", c);
        host = builder(RateLimitMode.EXECUTION_COUNT).model(batching(limited("a", 2, 1, Resource.of("R", true, 1))))
                .model(batching(limited("b", 2, 2, Resource.of("R", true, 1)))).loadModel("a").loadModel("b").build();
        CountDownLatch start = new CountDownLatch(1);
        List<CompletableFuture<Void>> clients = new ArrayList<>();
        AtomicLong tags = new AtomicLong();
        for (int t = 0; t < 8; t++) {
            String m = t % 2 == 0 ? "a" : "b";
            clients.add(CompletableFuture.runAsync(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 100; i++) {
                        List<CompletableFuture<InferenceResponse>> burst = new ArrayList<>();
                        List<Long> sent = new ArrayList<>();
                        for (int k = 0; k < 1 + ThreadLocalRandom.current().nextInt(4); k++) {
                            long tag = tags.incrementAndGet();
                            sent.add(tag);
                            burst.add(host.infer(io.backplane.spi.InferenceRequest.builder(m)
                                    .input(io.backplane.spi.Tensor.ofLongs("IN", new long[] {1, 1}, tag)).build()));
                        }
                        for (int k = 0; k < burst.size(); k++) {
                            assertEquals(sent.get(k), tagOf(burst.get(k).get(30, TimeUnit.SECONDS)));
                        }
                    }
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, runnable -> Thread.ofPlatform().start(runnable)));
        }
        start.countDown();
        for (CompletableFuture<Void> f : clients) {
            f.get(60, TimeUnit.SECONDS);
        }
        assertEquals(1, c.max.get(), "executes at once with one copy of R");
    }

    private static ModelConfig batching(ModelConfig c) {
        return c.toBuilder().maxBatchSize(8).dynamicBatching(io.backplane.spi.config.DynamicBatching.builder().maxQueueDelayMicros(200).build())
                .build();
    }

    /** Per-device resources of CPU instances share device 0's pool, as in Triton. */
    @Test
    void perDeviceCountOne_cpuInstances_shareDeviceZero() throws Exception {
        Concurrency c = new Concurrency();
        backend.on("a", c).on("b", c);
        host = builder(RateLimitMode.EXECUTION_COUNT).model(limited("a", 3, 1, Resource.of("R", false, 1)))
                .model(limited("b", 1, 1, Resource.of("R", false, 1))).loadModel("a").loadModel("b").build();
        load(List.of("a", "b"), 6, 100);
        assertEquals(1, c.max.get());
    }

    /** A handshake both models must reach inside execute at the same time: proof that both may run at once. */
    private static ScriptedBackend.Script meetThen(CountDownLatch both, ScriptedBackend.Script then) {
        AtomicBoolean first = new AtomicBoolean(true);
        return (batch, inst) -> {
            if (first.getAndSet(false)) {
                both.countDown();
                assertTrue(both.await(30, TimeUnit.SECONDS), "the other model never executed at the same time");
            }
            then.execute(batch, inst);
        };
    }

    private void bothAtOnce() throws Exception {
        CompletableFuture<InferenceResponse> a = host.infer(request("a", 1));
        CompletableFuture<InferenceResponse> b = host.infer(request("b", 2));
        assertEquals(1, tagOf(a.get(60, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(b.get(60, TimeUnit.SECONDS)));
    }

    @Test
    void globalCountTwo_bothMayRun_neverThree() throws Exception {
        CountDownLatch both = new CountDownLatch(2);
        Concurrency c = new Concurrency();
        backend.on("a", meetThen(both, c)).on("b", meetThen(both, c)).on("z", c);
        host = builder(RateLimitMode.EXECUTION_COUNT).rateLimitResource("R", 2).model(limited("a", 1, 1, Resource.of("R", true, 1)))
                .model(limited("b", 1, 1, Resource.of("R", true, 1))).model(limited("z", 2, 1, Resource.of("R", true, 1)))
                .loadModel("a").loadModel("b").loadModel("z").build();
        bothAtOnce();
        load(List.of("a", "b", "z"), 8, 100);
        assertTrue(c.max.get() <= 2, "at most two copies of R in use, saw " + c.max.get());
    }

    @Test
    void off_ignoresResources() throws Exception {
        CountDownLatch both = new CountDownLatch(2);
        backend.on("a", meetThen(both, ScriptedBackend.ECHO)).on("b", meetThen(both, ScriptedBackend.ECHO));
        host = builder(RateLimitMode.OFF).rateLimitResource("R", 1).model(limited("a", 1, 1, Resource.of("R", true, 1)))
                .model(limited("b", 1, 1, Resource.of("R", true, 1))).loadModel("a").loadModel("b").build();
        bothAtOnce();
    }

    /** Per-device resources on different GPUs do not contend: one copy each. */
    @Test
    void perDevice_differentGpus_runAtOnce() throws Exception {
        CountDownLatch both = new CountDownLatch(2);
        backend.on("a", meetThen(both, ScriptedBackend.ECHO)).on("b", meetThen(both, ScriptedBackend.ECHO));
        host = builder(RateLimitMode.EXECUTION_COUNT).model(limitedOn("a", 1, InstanceKind.GPU, List.of(0), 1, Resource.of("R", false, 1)))
                .model(limitedOn("b", 1, InstanceKind.GPU, List.of(1), 1, Resource.of("R", false, 1))).loadModel("a").loadModel("b").build();
        bothAtOnce();
    }

    /**
     * Priority 1 against priority 2 on one copy, four clients each so both always have work queued:
     * priority 1 gets more executions (about twice as many; only "more" is asserted).
     */
    @Test
    void priority_underContention_priorityOneRunsMore() throws Exception {
        Concurrency c = new Concurrency();
        AtomicLong hi = new AtomicLong();
        AtomicLong lo = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch enough = new CountDownLatch(1_500);
        backend.on("hi", (batch, inst) -> {
            if (!stop.get()) {
                hi.incrementAndGet();
                enough.countDown();
            }
            c.execute(batch, inst);
        }).on("lo", (batch, inst) -> {
            if (!stop.get()) {
                lo.incrementAndGet();
                enough.countDown();
            }
            c.execute(batch, inst);
        });
        host = builder(RateLimitMode.EXECUTION_COUNT).model(limited("hi", 1, 1, Resource.of("R", true, 1)))
                .model(limited("lo", 1, 2, Resource.of("R", true, 1))).loadModel("hi").loadModel("lo").build();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> clients = new ArrayList<>();
        AtomicInteger failures = new AtomicInteger();
        for (String m : List.of("hi", "lo")) {
            for (int t = 0; t < 4; t++) {
                clients.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        long tag = 0;
                        while (!stop.get()) {
                            tag++;
                            if (tagOf(host.infer(request(m, tag)).get(30, TimeUnit.SECONDS)) != tag) {
                                failures.incrementAndGet();
                            }
                        }
                    } catch (Exception e) {
                        failures.incrementAndGet();
                    }
                }));
            }
        }
        start.countDown();
        assertTrue(enough.await(60, TimeUnit.SECONDS), "1500 executions");
        stop.set(true);
        for (Thread t : clients) {
            t.join();
        }
        assertEquals(0, failures.get());
        assertEquals(1, c.max.get());
        assertTrue(hi.get() > lo.get(), "priority 1 ran " + hi.get() + " times, priority 2 " + lo.get());
    }

    @Test
    void explicitCountTooSmall_loadRefused_othersServe() throws Exception {
        host = builder(RateLimitMode.EXECUTION_COUNT).rateLimitResource("R", 1).model(limited("big", 2, 1, Resource.of("R", false, 2)))
                .model(limited("ok", 1, 1, Resource.of("R", false, 1))).loadModel("ok").build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("big"));
        assertTrue(e.getMessage().contains("needs 2 of rate_limiter resource 'R' on device 0 but --rate-limit-resource gives 1"), e.getMessage());
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertEquals(5, tagOf(host.infer(request("ok", 5)).get(30, TimeUnit.SECONDS)));
    }

    @Test
    void globalAndPerDevice_loadRefused() {
        host = builder(RateLimitMode.EXECUTION_COUNT).model(limited("g", 1, 1, Resource.of("R", true, 1)))
                .model(limited("d", 1, 1, Resource.of("R", false, 1))).loadModel("g").build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("d"));
        assertTrue(e.getMessage().contains("'R' is per-device") && e.getMessage().contains("global in model 'g'"), e.getMessage());
    }

    /** One terminal call per request, counted. */
    private static final class Ends implements ResponseObserver {
        final AtomicInteger ends = new AtomicInteger();
        final CompletableFuture<BackplaneException> error = new CompletableFuture<>();

        @Override
        public void onResponse(InferenceResponse response) {
        }

        @Override
        public void onComplete() {
            ends.incrementAndGet();
            error.complete(null);
        }

        @Override
        public void onError(BackplaneException e) {
            ends.incrementAndGet();
            error.complete(e);
        }
    }

    /** "holder" executes, holding the one copy of R, until {@code release} opens; returns once it is inside. */
    private CompletableFuture<InferenceResponse> holdResource(CountDownLatch release, AtomicInteger waiterExecutions) throws InterruptedException {
        CountDownLatch inside = new CountDownLatch(1);
        backend.on("holder", (batch, inst) -> {
            inside.countDown();
            assertTrue(release.await(60, TimeUnit.SECONDS));
            ScriptedBackend.ECHO.execute(batch, inst);
        }).on("waiter", (batch, inst) -> {
            waiterExecutions.incrementAndGet();
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        CompletableFuture<InferenceResponse> held = host.infer(request("holder", 7));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        return held;
    }

    /** Waits until a batch of "waiter" left its queue: it now waits on the limiter, as "holder" holds R. */
    private void awaitWaiterDispatched() throws InterruptedException {
        assertTrue(waiterDispatched.await(30, TimeUnit.SECONDS), "a request of 'waiter' was dispatched");
    }

    /** An unload whose requests wait for resources another model holds finishes (L7) and ends each of them once (L1). */
    @Test
    void unload_whileWaitingOnLimiter_finishes_everyRequestEndsOnce() throws Exception {
        host = builder(RateLimitMode.EXECUTION_COUNT).unloadTimeout(Duration.ofMillis(300)).model(limited("holder", 1, 1, Resource.of("R", true, 1)))
                .model(limited("waiter", 1, 1, Resource.of("R", true, 1))).loadModel("holder").loadModel("waiter").build();
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger waiterExecutions = new AtomicInteger();
        CompletableFuture<InferenceResponse> held = holdResource(release, waiterExecutions);
        List<Ends> waiting = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Ends e = new Ends();
            host.stream(request("waiter", i), e);
            waiting.add(e);
        }
        awaitWaiterDispatched(); // one batch waits on the limiter, the rest is queued
        host.unload("waiter");
        for (Ends e : waiting) {
            BackplaneException error = e.error.get(30, TimeUnit.SECONDS);
            assertEquals(ErrorCode.UNAVAILABLE, error.code(), error.getMessage());
            assertEquals(1, e.ends.get(), "ended once");
        }
        release.countDown();
        assertEquals(7, tagOf(held.get(30, TimeUnit.SECONDS)));
        assertEquals(0, waiterExecutions.get(), "the waiting batch never executed");
        for (Ends e : waiting) {
            assertEquals(1, e.ends.get(), "still ended once");
        }
    }

    /** A request cancelled while its batch waits for resources ends once, CANCELLED, and never reaches the model. */
    @Test
    void cancel_whileWaitingOnLimiter_endsOnceCancelled_neverExecutes() throws Exception {
        host = builder(RateLimitMode.EXECUTION_COUNT).model(limited("holder", 1, 1, Resource.of("R", true, 1)))
                .model(limited("waiter", 1, 1, Resource.of("R", true, 1))).loadModel("holder").loadModel("waiter").build();
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger waiterExecutions = new AtomicInteger();
        CompletableFuture<InferenceResponse> held = holdResource(release, waiterExecutions);
        Ends e = new Ends();
        RequestHandle handle = host.stream(request("waiter", 1), e);
        awaitWaiterDispatched();
        assertTrue(handle.cancel());
        BackplaneException error = e.error.get(30, TimeUnit.SECONDS);
        assertEquals(ErrorCode.CANCELLED, error.code(), error.getMessage());
        release.countDown();
        assertEquals(7, tagOf(held.get(30, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(host.infer(request("waiter", 2)).get(30, TimeUnit.SECONDS)), "the waiter serves on");
        assertEquals(1, waiterExecutions.get(), "only the second request executed");
        assertEquals(1, e.ends.get());
    }

    /** Closing the host while batches wait for resources ends everything (L10). */
    @Test
    void close_whileWaitingOnLimiter_endsEverything() throws Exception {
        host = builder(RateLimitMode.EXECUTION_COUNT).unloadTimeout(Duration.ofMillis(300)).model(limited("holder", 1, 1, Resource.of("R", true, 1)))
                .model(limited("waiter", 2, 1, Resource.of("R", true, 1))).loadModel("holder").loadModel("waiter").build();
        CountDownLatch release = new CountDownLatch(1);
        CompletableFuture<InferenceResponse> held = holdResource(release, new AtomicInteger());
        List<CompletableFuture<InferenceResponse>> waiting = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            waiting.add(host.infer(request("waiter", i)));
        }
        awaitWaiterDispatched();
        Thread closer = Thread.ofPlatform().start(host::close);
        for (CompletableFuture<InferenceResponse> f : waiting) {
            ExecutionException x = assertThrows(ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS));
            assertInstanceOf(BackplaneException.class, x.getCause());
        }
        release.countDown();
        closer.join();
        held.handle((r, t) -> null).get(30, TimeUnit.SECONDS);
    }
}
