package io.backplane.core.batch;

import static io.backplane.core.batch.BatchFixture.dynamic;
import static io.backplane.core.batch.BatchFixture.model;
import static io.backplane.core.batch.BatchFixture.request;
import static io.backplane.core.batch.BatchFixture.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The batcher and scheduler under real concurrency, with the invariants checked on every run:
 * each request ends exactly once with its own result (payloads are tagged, so a swapped result is
 * caught), 1 ≤ batch ≤ max, a request executes at most once, FIFO within a priority level,
 * higher levels first, execute never concurrent on one instance, and no caller left waiting.
 */
@Timeout(120)
class BatcherConcurrencyTest {
    private static final Logger log = LoggerFactory.getLogger(BatcherConcurrencyTest.class);
    private final ScriptedBackend backend = new ScriptedBackend();
    private BackplaneHost host;

    @AfterEach
    void close() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests());
        }
        Hygiene.assertNoBackplaneThreads();
    }

    /** Checks every batch as the model sees it; collects violations instead of throwing inside execute. */
    private static final class Checker implements ScriptedBackend.Script {
        final int max;
        final boolean singleInstance;
        final long maxSleepMicros;
        final ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        final Set<Long> executed = ConcurrentHashMap.newKeySet();
        final Map<String, AtomicInteger> inFlight = new ConcurrentHashMap<>();
        final Map<Integer, Long> lastIdPerLevel = new ConcurrentHashMap<>();
        final AtomicLong batches = new AtomicLong();
        final AtomicLong fullBatches = new AtomicLong();
        final SequencedBatcherFactory order = new SequencedBatcherFactory();

        Checker(int max, boolean singleInstance, long maxSleepMicros) {
            this.max = max;
            this.singleInstance = singleInstance;
            this.maxSleepMicros = maxSleepMicros;
        }

        @Override
        public void execute(List<ScheduledRequest> batch, InstanceContext instance) throws Exception {
            AtomicInteger busy = inFlight.computeIfAbsent(instance.name(), k -> new AtomicInteger());
            if (busy.incrementAndGet() != 1) {
                violations.add("execute concurrent on instance " + instance.name());
            }
            try {
                int total = 0;
                ScheduledRequest prev = null;
                for (ScheduledRequest r : batch) {
                    total += r.batchSize();
                    if (!executed.add(r.id())) {
                        violations.add("request " + r.id() + " executed twice (B1)");
                    }
                    long seq = order.of(r);
                    if (prev != null && (prev.priorityLevel() > r.priorityLevel()
                            || (prev.priorityLevel() == r.priorityLevel() && order.of(prev) > seq))) {
                        violations.add("batch out of priority/FIFO order: " + prev.id() + "@" + prev.priorityLevel() + " before " + r.id() + "@"
                                + r.priorityLevel());
                    }
                    if (singleInstance) {
                        Long last = lastIdPerLevel.put(r.priorityLevel(), seq);
                        if (last != null && last > seq) {
                            violations.add("FIFO broken in level " + r.priorityLevel() + ": queue entry " + last + " ran before " + seq);
                        }
                    }
                    prev = r;
                }
                if (total < 1 || total > max) {
                    violations.add("batch size " + total + " outside 1.." + max + " (B2)");
                }
                batches.incrementAndGet();
                if (total == max) {
                    fullBatches.incrementAndGet();
                }
                if (maxSleepMicros > 0) {
                    TimeUnit.MICROSECONDS.sleep(ThreadLocalRandom.current().nextLong(maxSleepMicros + 1));
                }
                if (ThreadLocalRandom.current().nextInt(4) == 0) { // scenario 15: answered on a foreign thread, out of order
                    Thread t = Thread.ofPlatform().start(() -> { // a platform thread: busy virtual callers cannot starve it
                        for (ScheduledRequest r : batch.reversed()) {
                            answer(r);
                        }
                    });
                    t.join();
                } else {
                    for (ScheduledRequest r : batch) {
                        answer(r);
                    }
                }
            } finally {
                busy.decrementAndGet();
            }
        }

        private static void answer(ScheduledRequest r) {
            if (!r.sender().isClosed()) {
                try {
                    r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN").withName("OUT"))));
                } catch (IllegalStateException closedMeanwhile) {
                    // unload or a race with the core: the sender says so, nothing reached the client
                }
            }
        }
    }

    /** Counts every call a streamed request gets. */
    private static final class Call implements ResponseObserver {
        final long tag;
        final int batch;
        final AtomicInteger responses = new AtomicInteger();
        final AtomicInteger terminals = new AtomicInteger();
        final CountDownLatch done = new CountDownLatch(1);
        volatile @Nullable InferenceResponse response;
        volatile @Nullable BackplaneException error;
        volatile boolean cancelAsked;
        volatile long id;

        Call(long tag, int batch) {
            this.tag = tag;
            this.batch = batch;
        }

        @Override
        public void onResponse(InferenceResponse r) {
            responses.incrementAndGet();
            response = r;
        }

        @Override
        public void onComplete() {
            terminals.incrementAndGet();
            done.countDown();
        }

        @Override
        public void onError(BackplaneException e) {
            error = e;
            terminals.incrementAndGet();
            done.countDown();
        }

        void check(ConcurrentLinkedQueue<String> violations) throws InterruptedException {
            if (!done.await(30, TimeUnit.SECONDS)) {
                violations.add("caller " + tag + " left waiting");
                return;
            }
            if (terminals.get() != 1 || responses.get() > 1) {
                violations.add("caller " + tag + " got " + terminals.get() + " terminal call(s) and " + responses.get() + " response(s)");
            }
            BackplaneException e = error;
            InferenceResponse r = response;
            if (e != null) {
                if (e.code() != ErrorCode.CANCELLED || !cancelAsked) {
                    violations.add("caller " + tag + " failed: " + e);
                }
            } else if (r == null || tagOf(r) != tag || r.output("OUT").shape()[0] != batch) {
                violations.add("caller " + tag + " got a result that is not its own: " + r);
            }
        }
    }

    /** Scenarios 1, 10, 15, 22, 30: random load (sizes, priorities, cancels, foreign-thread answers) against random configs. */
    @Test
    void randomizedLoad_everyInvariantHolds() throws Exception {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        for (int round = 0; round < 6; round++) {
            int max = 1 + random.nextInt(16);
            int instances = 1 + random.nextInt(3);
            long delayMicros = random.nextInt(3) * 500L;
            int callers = 8 + random.nextInt(40);
            int perCaller = 30;
            boolean pooled = round % 2 == 0; // scenario 30: pooled platform threads resubmitting
            String config = "seed " + seed + " round " + round + ": max " + max + ", instances " + instances + ", delay " + delayMicros + " µs, callers "
                    + callers + (pooled ? " (pool)" : " (virtual)");
            Checker checker = new Checker(max, instances == 1, 1500);
            backend.on("m", checker);
            DynamicBatching db = dynamic(List.of(), delayMicros, false, 2, 2, QueuePolicy.DEFAULT, Map.of());
            host = BatchFixture.host(backend).batcher(checker.order).model(model("m", max, db, instances).build()).loadModel("m").build();
            ConcurrentLinkedQueue<String> violations = checker.violations;
            List<Call> calls = new ConcurrentLinkedQueue<Call>().stream().toList();
            ConcurrentLinkedQueue<Call> all = new ConcurrentLinkedQueue<>();
            AtomicLong tags = new AtomicLong();
            try (ExecutorService pool = pooled ? Executors.newFixedThreadPool(8) : Executors.newVirtualThreadPerTaskExecutor()) {
                List<Future<?>> fs = new ArrayList<>();
                for (int c = 0; c < callers; c++) {
                    fs.add(pool.submit(() -> {
                        ThreadLocalRandom r = ThreadLocalRandom.current();
                        for (int i = 0; i < perCaller; i++) {
                            long tag = tags.incrementAndGet();
                            int batch = 1 + r.nextInt(Math.min(3, max));
                            Call call = new Call(tag, batch);
                            all.add(call);
                            RequestHandle h = host.stream(request("m", tag, batch, r.nextInt(3), 0), call);
                            if (r.nextInt(20) == 0) {
                                if (r.nextBoolean()) {
                                    Thread.onSpinWait();
                                } else {
                                    TimeUnit.MICROSECONDS.sleep(r.nextInt(2000));
                                }
                                call.cancelAsked = true;
                                h.cancel();
                            }
                            if (r.nextInt(3) == 0) {
                                call.check(violations); // a synchronous caller
                            }
                        }
                        return null;
                    }));
                }
                for (Future<?> f : fs) {
                    f.get(60, TimeUnit.SECONDS);
                }
            }
            for (Call call : all) {
                call.check(violations);
            }
            assertTrue(calls.isEmpty());
            host.close();
            assertEquals(0, host.openRequests(), config);
            for (Call call : all) {
                if (call.terminals.get() != 1) {
                    violations.add("caller " + call.tag + " got " + call.terminals.get() + " terminal calls after close");
                }
            }
            assertEquals(List.of(), List.copyOf(violations), config);
            assertEquals(0, host.duplicateReleases(), config);
            log.info("{}: {} requests, {} batches", config, all.size(), checker.batches.get());
            host = null;
        }
    }

    /**
     * Scenario 3, Cortex's bug at test scale: 128 callers looping against max batch 32, 1 ms delay,
     * a model that sleeps 3 ms, for 3 s: zero stuck callers, every result its own.
     */
    @Test
    void cortexScenario_128Callers_nobodyStuck_everyResultOwn() throws Exception {
        Checker checker = new Checker(32, true, 0);
        backend.on("m", (batch, inst) -> {
            Thread.sleep(3);
            checker.execute(batch, inst);
        });
        host = BatchFixture.host(backend).batcher(checker.order).model(model("m", 32, dynamic(1000), 1).build()).loadModel("m").build();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        AtomicLong tags = new AtomicLong();
        AtomicLong done = new AtomicLong();
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> fs = new ArrayList<>();
            for (int c = 0; c < 128; c++) {
                fs.add(pool.submit(() -> {
                    while (System.nanoTime() < end) {
                        long tag = tags.incrementAndGet();
                        InferenceResponse r = host.infer(request("m", tag)).get(10, TimeUnit.SECONDS); // a stuck caller times out here
                        if (tagOf(r) != tag) {
                            checker.violations.add("caller " + tag + " got " + tagOf(r));
                        }
                        done.incrementAndGet();
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
        assertEquals(List.of(), List.copyOf(checker.violations));
        assertEquals(done.get(), tags.get(), "every request answered");
        assertEquals(done.get(), checker.executed.size(), "every request executed exactly once");
        log.info("cortex scenario: {} requests in {} batches, {} full", done.get(), checker.batches.get(), checker.fullBatches.get());
    }

    /** Scenario 10: 10k submits released together: every invariant, every caller answered with its own result. */
    @Test
    void tenThousandSubmitsReleasedTogether() throws Exception {
        Checker checker = new Checker(32, false, 500);
        backend.on("m", checker);
        // 10,000 requests queue at once on purpose: no default queue bound
        host = BatchFixture.host(backend).defaultMaxQueueSize(0).batcher(checker.order).model(model("m", 32, dynamic(1000), 2).build()).loadModel("m")
                .build();
        CountDownLatch go = new CountDownLatch(1);
        int n = 10_000;
        List<CompletableFuture<InferenceResponse>> fs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            fs.add(new CompletableFuture<>());
        }
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int i = 0; i < n; i++) {
                int tag = i;
                pool.submit(() -> {
                    go.await();
                    host.infer(request("m", tag)).whenComplete((r, e) -> {
                        if (e != null) {
                            fs.get(tag).completeExceptionally(e);
                        } else {
                            fs.get(tag).complete(r);
                        }
                    });
                    return null;
                });
            }
            go.countDown();
        }
        for (int i = 0; i < n; i++) {
            assertEquals(i, tagOf(fs.get(i).get(30, TimeUnit.SECONDS)));
        }
        assertEquals(List.of(), List.copyOf(checker.violations));
        assertEquals(n, checker.executed.size());
    }

    /**
     * Scenario 25 / B3: preserve_ordering with two instances of different speed delivers in arrival
     * order, errors included (a failed batch releases its slots); without it the fast instance overtakes.
     */
    @Test
    void preserveOrdering_twoInstancesOfDifferentSpeed_arrivalOrderKept() throws Exception {
        List<Long> ordered = deliveryOrder(true);
        List<Long> expected = new ArrayList<>();
        for (long t = 0; t < ordered.size(); t++) {
            expected.add(t);
        }
        assertEquals(expected, ordered);
        host.close();
        host = null;
        assertNotEquals(expected, deliveryOrder(false), "the test model does reorder without preserve_ordering");
    }

    private List<Long> deliveryOrder(boolean preserve) throws Exception {
        backend.on("m", (batch, inst) -> {
            if (inst.index() == 0) {
                Thread.sleep(15);
            }
            for (ScheduledRequest r : batch) {
                if (BatchFixture.tagOf(r) % 13 == 5) {
                    throw new IllegalStateException("scripted failure");
                }
            }
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        DynamicBatching db = dynamic(List.of(), 0, preserve, 0, 0, QueuePolicy.DEFAULT, Map.of());
        host = BatchFixture.host(backend).model(model("m", 4, db, 2).build()).loadModel("m").build();
        List<Long> delivered = java.util.Collections.synchronizedList(new ArrayList<>());
        List<CompletableFuture<?>> fs = new ArrayList<>();
        for (long t = 0; t < 200; t++) {
            long tag = t;
            fs.add(host.infer(request("m", tag)).handle((r, e) -> delivered.add(tag)));
            if (t % 3 == 0) {
                Thread.sleep(1);
            }
        }
        for (CompletableFuture<?> f : fs) {
            f.get(30, TimeUnit.SECONDS);
        }
        return List.copyOf(delivered);
    }

    /** Scenario 31: a caller interrupted while waiting keeps its interrupt; its request and its batch still complete. */
    @Test
    void callerInterruptedWhileWaiting_batchUnharmed() throws Exception {
        CountDownLatch executing = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            executing.countDown();
            release.await();
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        host = BatchFixture.host(backend).model(model("m", 8, dynamic(0), 1).build()).loadModel("m").build();
        CompletableFuture<InferenceResponse> f = host.infer(request("m", 1));
        CompletableFuture<InferenceResponse> other = host.infer(request("m", 2));
        executing.await();
        java.util.concurrent.atomic.AtomicBoolean interrupted = new java.util.concurrent.atomic.AtomicBoolean();
        Thread caller = Thread.ofPlatform().start(() -> {
            try {
                f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                interrupted.set(Thread.currentThread().isInterrupted());
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        caller.interrupt();
        caller.join(5000);
        assertTrue(interrupted.get(), "the caller saw its interrupt");
        release.countDown();
        assertEquals(1, tagOf(f.get(5, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(other.get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 28 / L7: unload racing submits: every accepted request ends exactly once; nobody waits; afterwards nothing is open. */
    @Test
    void unloadRacingSubmits_everyRequestEndsOnce() throws Exception {
        Checker checker = new Checker(8, false, 1000);
        backend.on("m", checker);
        host = BatchFixture.host(backend).batcher(checker.order).model(model("m", 8, dynamic(500), 2).build()).loadModel("m").build();
        ConcurrentLinkedQueue<Call> all = new ConcurrentLinkedQueue<>();
        AtomicLong tags = new AtomicLong();
        java.util.concurrent.atomic.AtomicBoolean unloaded = new java.util.concurrent.atomic.AtomicBoolean();
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> fs = new ArrayList<>();
            for (int c = 0; c < 32; c++) {
                fs.add(pool.submit(() -> {
                    int after = 0;
                    while (after < 20) {
                        if (unloaded.get()) {
                            after++;
                        }
                        long tag = tags.incrementAndGet();
                        Call call = new Call(tag, 1);
                        all.add(call);
                        call.id = host.stream(request("m", tag), call).id();
                        // wait for each answer: virtual callers that never block would hog the carriers and starve the model
                        call.done.await(10, TimeUnit.SECONDS);
                        Thread.yield();
                    }
                    return null;
                }));
            }
            Thread.sleep(300);
            unloaded.set(true); // callers stop 20 submits later, while the unload runs
            host.unload("m");
            for (Future<?> f : fs) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
        int ok = 0;
        for (Call call : all) {
            if (!call.done.await(10, TimeUnit.SECONDS)) {
                checker.violations.add("caller " + call.tag + " left waiting");
                continue;
            }
            if (call.terminals.get() != 1) {
                checker.violations.add("caller " + call.tag + " got " + call.terminals.get() + " terminal calls");
            }
            BackplaneException e = call.error;
            if (e == null) {
                ok++;
                if (tagOf(call.response) != call.tag) {
                    checker.violations.add("caller " + call.tag + " got another result");
                }
            } else if (e.code() != ErrorCode.UNAVAILABLE && e.code() != ErrorCode.NOT_FOUND) {
                checker.violations.add("caller " + call.tag + " failed with " + e);
            } else if (checker.executed.contains(call.id)) {
                checker.violations.add("request " + call.id + " executed, then failed with " + e);
            }
        }
        assertEquals(List.of(), List.copyOf(checker.violations));
        assertEquals(0, host.openRequests());
        assertTrue(ok > 0, "some requests ran before the unload");
        assertEquals(ok, checker.executed.size(), "exactly the executed requests succeeded (the model is fast, the unload deadline long)");
    }

    /** Scenario 17 / L8: an instance that dies mid-batch: each request of the batch gets one terminal error; the next request succeeds. */
    @Test
    void instanceDiesMidBatch_eachRequestOneError_nextSucceeds() throws Exception {
        CountDownLatch queued = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            if (BatchFixture.tags(batch).contains(7L)) {
                queued.await();
                inst.reportFailure(new IllegalStateException("died mid-batch"));
                return; // as a dead process would: nothing answered
            }
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        host = BatchFixture.host(backend).model(model("m", 4, dynamic(20_000), 1).build()).loadModel("m").build();
        List<CompletableFuture<InferenceResponse>> dying = List.of(host.infer(request("m", 6)), host.infer(request("m", 7)));
        queued.countDown();
        for (CompletableFuture<InferenceResponse> f : dying) {
            BackplaneException e = BatchFixture.failure(f);
            assertEquals(ErrorCode.UNAVAILABLE, e.code());
            assertTrue(e.getMessage().contains("died mid-batch"), e.getMessage());
        }
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!host.isModelReady("m") && System.nanoTime() < end) {
            Thread.sleep(10);
        }
        assertEquals(8, tagOf(host.infer(request("m", 8)).get(10, TimeUnit.SECONDS)));
    }

    /** Scenario 14: an execute that hangs is failed by the execute watchdog; the other instance keeps serving meanwhile. */
    @Test
    void hungExecute_watchdogFailsIt_otherInstanceServes() throws Exception {
        CountDownLatch hung = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            if (BatchFixture.tags(batch).contains(1L)) {
                hung.countDown();
                Thread.sleep(30_000); // the watchdog interrupts it
            }
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        host = BatchFixture.host(backend).model(model("m", 4, dynamic(0), 2).parameter("execute_timeout_ms", "500").build()).loadModel("m").build();
        CompletableFuture<InferenceResponse> stuck = host.infer(request("m", 1));
        hung.await();
        for (long t = 2; t <= 20; t++) {
            assertEquals(t, tagOf(host.infer(request("m", t)).get(5, TimeUnit.SECONDS)), "served while the other instance hangs");
        }
        BackplaneException e = BatchFixture.failure(stuck);
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("execute_timeout_ms"), e.getMessage());
    }
}
