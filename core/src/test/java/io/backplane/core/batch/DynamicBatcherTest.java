package io.backplane.core.batch;

import static io.backplane.core.batch.BatchFixture.dynamic;
import static io.backplane.core.batch.BatchFixture.failure;
import static io.backplane.core.batch.BatchFixture.model;
import static io.backplane.core.batch.BatchFixture.policy;
import static io.backplane.core.batch.BatchFixture.request;
import static io.backplane.core.batch.BatchFixture.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.batch.BatchFixture.FakeTicker;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.TimeoutAction;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The dynamic batcher's rules (B2–B6), driven deterministically: the host runs on a
 * {@link FakeTicker} that only the test moves, so "not yet" is provable by not moving it.
 */
@Timeout(60)
class DynamicBatcherTest {
    private static final long SECOND_MICROS = 1_000_000;
    private final ScriptedBackend backend = new ScriptedBackend();
    private final Recorder recorder = new Recorder();
    private final FakeTicker clock = new FakeTicker();
    private BackplaneHost host;

    private BackplaneHost start(ModelConfig config) {
        backend.on(config.name(), recorder);
        host = BatchFixture.host(backend).ticker(clock).model(config).loadModel(config.name()).build();
        return host;
    }

    private CompletableFuture<InferenceResponse> infer(long tag) {
        return host.infer(request("m", tag));
    }

    /** Occupies the single instance with request 0 so that later requests queue. */
    private CompletableFuture<InferenceResponse> occupy() throws InterruptedException {
        recorder.close();
        CompletableFuture<InferenceResponse> f = infer(0);
        List<Long> b = recorder.batches.poll(200, TimeUnit.MILLISECONDS);
        if (b == null) {
            clock.advance(Duration.ofDays(1)); // past the delay (models with a long delay have no queue timeout here)
            b = recorder.next();
        }
        assertEquals(List.of(0L), b);
        return f;
    }

    @AfterEach
    void close() {
        recorder.open();
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests());
        }
        Hygiene.assertNoBackplaneThreads();
    }

    /** Scenarios 4 and 7: under the delay, a partial batch waits; the max-th arrival dispatches at once, full. */
    @Test
    void fullBatch_leavesOnTheMaxthArrival_partialWaitsForDelay() throws Exception {
        start(model("m", 4, dynamic(SECOND_MICROS), 1).build());
        List<CompletableFuture<InferenceResponse>> f = new ArrayList<>();
        for (long t = 1; t <= 3; t++) {
            f.add(infer(t));
        }
        recorder.assertQuiet(100);
        f.add(infer(4));
        assertEquals(List.of(1L, 2L, 3L, 4L), recorder.next());
        for (int i = 0; i < 4; i++) {
            assertEquals(i + 1, tagOf(f.get(i).get(5, TimeUnit.SECONDS)));
        }
        CompletableFuture<InferenceResponse> lone = infer(5);
        recorder.assertQuiet(50);
        clock.advance(Duration.ofMillis(1001));
        assertEquals(List.of(5L), recorder.next());
        assertEquals(5, tagOf(lone.get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 5: max batch 1 never waits for the delay. */
    @Test
    void maxBatchOne_neverWaitsForTheDelay() throws Exception {
        start(model("m", 1, dynamic(1000 * SECOND_MICROS), 1).build());
        for (long t = 1; t <= 5; t++) {
            assertEquals(t, tagOf(infer(t).get(5, TimeUnit.SECONDS)));
        }
    }

    /**
     * max_batch_size 0: the model never batches, even when it selects the dynamic batcher (the
     * config validator refuses a dynamic_batching block without max_batch_size, so the parameter does it).
     */
    @Test
    void maxBatchZero_neverBatches() throws Exception {
        ModelConfig c = ScriptedBackend.model("m", false).toBuilder().parameter("batcher", "dynamic").build();
        backend.on("m", recorder);
        host = BatchFixture.host(backend).ticker(clock).model(c).loadModel("m").build();
        List<CompletableFuture<InferenceResponse>> f = new ArrayList<>();
        for (long t = 1; t <= 6; t++) {
            f.add(host.infer(io.backplane.spi.InferenceRequest.builder("m").input(io.backplane.spi.Tensor.ofLongs("IN", new long[] {1}, t * 1000)).build()));
        }
        for (int i = 0; i < 6; i++) {
            assertEquals(i + 1, tagOf(f.get(i).get(5, TimeUnit.SECONDS)));
            assertEquals(1, recorder.next().size());
        }
    }

    /** Scenario 4 / B4: the delay counts from the oldest queued request, not the newest. */
    @Test
    void delay_isMeasuredFromTheOldestQueuedRequest() throws Exception {
        start(model("m", 8, dynamic(SECOND_MICROS), 1).build());
        CompletableFuture<InferenceResponse> a = infer(1);
        clock.advance(Duration.ofMillis(600));
        CompletableFuture<InferenceResponse> b = infer(2);
        recorder.assertQuiet(50);
        clock.advance(Duration.ofMillis(401));
        assertEquals(List.of(1L, 2L), recorder.next());
        assertEquals(1, tagOf(a.get(5, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(b.get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 8: a request that already waited its delay while the instance was busy goes as soon as the instance frees. */
    @Test
    void requestThatWaitedWhileBusy_getsNoSecondDelay() throws Exception {
        start(model("m", 8, dynamic(SECOND_MICROS), 1).build());
        clock.advance(Duration.ofSeconds(2)); // request 0 leaves after its own delay
        CompletableFuture<InferenceResponse> first = host.infer(request("m", 0));
        recorder.close();
        clock.advance(Duration.ofMillis(1001));
        assertEquals(List.of(0L), recorder.next());
        CompletableFuture<InferenceResponse> waiting = infer(1);
        clock.advance(Duration.ofMillis(1500)); // request 1 passed its delay while the instance was busy
        recorder.assertQuiet(50);
        recorder.open();
        assertEquals(List.of(1L), recorder.next()); // no second delay: the clock does not move again
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        assertEquals(1, tagOf(waiting.get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 9: after a burst and a gap longer than the delay, a new burst waits its own full delay (no stale timer). */
    @Test
    void burstGapBurst_secondBurstWaitsItsOwnDelay() throws Exception {
        start(model("m", 8, dynamic(SECOND_MICROS), 1).build());
        infer(1);
        infer(2);
        clock.advance(Duration.ofMillis(1001));
        assertEquals(List.of(1L, 2L), recorder.next());
        clock.advance(Duration.ofSeconds(10));
        CompletableFuture<InferenceResponse> c = infer(3);
        clock.advance(Duration.ofMillis(900));
        recorder.assertQuiet(100);
        clock.advance(Duration.ofMillis(101));
        assertEquals(List.of(3L), recorder.next());
        assertEquals(3, tagOf(c.get(5, TimeUnit.SECONDS)));
    }

    /** Scenarios 1 and 6: delay 0 never waits; requests that arrive while a batch executes (blocked on a latch) all finish, together, in the next batch. */
    @Test
    void delayZero_opportunisticBatches() throws Exception {
        start(model("m", 8, dynamic(0), 1).build());
        CompletableFuture<InferenceResponse> first = occupy();
        List<CompletableFuture<InferenceResponse>> f = new ArrayList<>();
        for (long t = 1; t <= 5; t++) {
            f.add(infer(t));
        }
        recorder.open();
        assertEquals(List.of(1L, 2L, 3L, 4L, 5L), recorder.next());
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        for (int i = 0; i < 5; i++) {
            assertEquals(i + 1, tagOf(f.get(i).get(5, TimeUnit.SECONDS)));
        }
    }

    /** Scenario 2: a backlog over max leaves at once in full batches when the instance frees; B2 counts the batch dimension. */
    @Test
    void backlog_leavesInFullBatches_countedAlongTheBatchDimension() throws Exception {
        start(model("m", 4, dynamic(1000 * SECOND_MICROS), 1).build());
        CompletableFuture<InferenceResponse> first = occupy();
        List<CompletableFuture<InferenceResponse>> f = new ArrayList<>();
        f.add(host.infer(request("m", 1, 3, 0, 0)));
        f.add(host.infer(request("m", 2, 1, 0, 0)));
        f.add(host.infer(request("m", 3, 2, 0, 0)));
        f.add(host.infer(request("m", 4, 2, 0, 0)));
        f.add(host.infer(request("m", 5, 4, 0, 0)));
        recorder.open();
        assertEquals(List.of(1L, 2L), recorder.next()); // 3 + 1 = 4
        assertEquals(List.of(3L, 4L), recorder.next()); // 2 + 2 = 4
        assertEquals(List.of(5L), recorder.next()); // 4
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        for (int i = 0; i < 5; i++) {
            InferenceResponse r = f.get(i).get(5, TimeUnit.SECONDS);
            assertEquals(i + 1, tagOf(r));
        }
    }

    /** preferred_batch_size: a preferred size goes at once; the batch never grows past the largest preferred size. */
    @Test
    void preferredBatchSize_leavesAtOnce() throws Exception {
        start(model("m", 8, dynamic(List.of(2, 4), 1000 * SECOND_MICROS, false, 0, 0, QueuePolicy.DEFAULT, Map.of()), 1).build());
        infer(1);
        recorder.assertQuiet(100);
        infer(2);
        assertEquals(List.of(1L, 2L), recorder.next());
        occupy();
        for (long t = 1; t <= 5; t++) {
            infer(10 + t);
        }
        recorder.open();
        assertEquals(List.of(11L, 12L, 13L, 14L), recorder.next()); // capped at the largest preferred size
        recorder.assertQuiet(50); // 15 alone is not preferred: it waits for the delay
        clock.advance(Duration.ofSeconds(1001));
        assertEquals(List.of(15L), recorder.next());
    }

    /** Scenario 27: a request whose own batch exceeds max_batch_size is rejected at admission, naming both numbers. */
    @Test
    void requestOverMaxBatch_rejectedNamingBothNumbers() {
        start(model("m", 4, dynamic(0), 1).build());
        BackplaneException e = failure(host.infer(request("m", 1, 5, 0, 0)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("5") && e.getMessage().contains("max_batch_size 4"), e.getMessage());
    }

    /** Scenario 26 / B3: strict priority, FIFO within a level. */
    @Test
    void priority_higherLevelFirst_fifoWithinLevel() throws Exception {
        start(model("m", 2, dynamic(List.of(), 0, false, 3, 2, QueuePolicy.DEFAULT, Map.of()), 1).build());
        occupy();
        List<CompletableFuture<InferenceResponse>> f = new ArrayList<>();
        f.add(host.infer(request("m", 1, 1, 3, 0)));
        f.add(host.infer(request("m", 2, 1, 0, 0))); // default level 2
        f.add(host.infer(request("m", 3, 1, 3, 0)));
        f.add(host.infer(request("m", 4, 1, 1, 0)));
        f.add(host.infer(request("m", 5, 1, 2, 0)));
        f.add(host.infer(request("m", 6, 1, 1, 0)));
        recorder.open();
        assertEquals(List.of(4L, 6L), recorder.next());
        assertEquals(List.of(2L, 5L), recorder.next());
        assertEquals(List.of(1L, 3L), recorder.next());
        for (int i = 0; i < 6; i++) {
            assertEquals(i + 1, tagOf(f.get(i).get(5, TimeUnit.SECONDS)));
        }
        BackplaneException bad = failure(host.infer(request("m", 7, 1, 4, 0)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, bad.code());
    }

    /** Scenario 18 / B5: a queue timeout fires while the only instance is busy, not after the batch. */
    @Test
    void queueTimeout_firesWhileInstanceBusy() throws Exception {
        start(model("m", 4, dynamic(List.of(), 0, false, 0, 0, policy(TimeoutAction.REJECT, 100_000, false, 0), Map.of()), 1).build());
        CompletableFuture<InferenceResponse> first = occupy();
        CompletableFuture<InferenceResponse> queued = infer(1);
        clock.advance(Duration.ofMillis(99));
        Thread.sleep(30);
        assertFalse(queued.isDone(), "not yet timed out");
        clock.advance(Duration.ofMillis(2));
        BackplaneException e = failure(queued);
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
        assertTrue(e.getMessage().contains("100000 µs"), e.getMessage());
        assertFalse(first.isDone(), "the timeout fired while the instance was still busy");
        recorder.open();
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        recorder.assertQuiet(50); // the timed-out request never executes
    }

    /** Scenario 19: a request's own timeout applies only when allowed, and only to shorten the default. */
    @Test
    void timeoutOverride_shorterHonoured_longerClamped_ignoredWhenNotAllowed() throws Exception {
        QueuePolicy allow = policy(TimeoutAction.REJECT, SECOND_MICROS, true, 0);
        QueuePolicy deny = policy(TimeoutAction.REJECT, SECOND_MICROS, false, 0);
        start(model("m", 4, dynamic(List.of(), 0, false, 2, 1, allow, Map.of(2, deny)), 1).build());
        occupy();
        CompletableFuture<InferenceResponse> shorter = host.infer(request("m", 1, 1, 1, 100_000));
        CompletableFuture<InferenceResponse> longer = host.infer(request("m", 2, 1, 1, 10 * SECOND_MICROS));
        CompletableFuture<InferenceResponse> denied = host.infer(request("m", 3, 1, 2, 100_000));
        clock.advance(Duration.ofMillis(150));
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, failure(shorter).code());
        Thread.sleep(30);
        assertFalse(longer.isDone());
        assertFalse(denied.isDone(), "level 2 does not allow overrides");
        clock.advance(Duration.ofMillis(900));
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, failure(longer).code());
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, failure(denied).code());
    }

    /** A default timeout of 0 means none; a request's own timeout then applies when overrides are allowed. */
    @Test
    void timeoutOverride_withoutDefault_appliesOwnTimeout() throws Exception {
        start(model("m", 4, dynamic(List.of(), 0, false, 0, 0, policy(TimeoutAction.REJECT, 0, true, 0), Map.of()), 1).build());
        occupy();
        CompletableFuture<InferenceResponse> own = host.infer(request("m", 1, 1, 0, 100_000));
        CompletableFuture<InferenceResponse> none = infer(2);
        clock.advance(Duration.ofSeconds(100));
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, failure(own).code());
        recorder.open();
        assertEquals(2, tagOf(none.get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 20: DELAY moves an expired request behind the fresh ones of its level; it still completes once load stops. */
    @Test
    void delayAction_expiredRequestGoesBehindFreshOnes_andStillCompletes() throws Exception {
        start(model("m", 1, dynamic(List.of(), 0, false, 0, 0, policy(TimeoutAction.DELAY, 100_000, false, 0), Map.of()), 1).build());
        occupy();
        CompletableFuture<InferenceResponse> old = infer(1);
        clock.advance(Duration.ofMillis(150));
        Thread.sleep(30);
        CompletableFuture<InferenceResponse> fresh1 = infer(2);
        CompletableFuture<InferenceResponse> fresh2 = infer(3);
        recorder.open();
        assertEquals(List.of(2L), recorder.next());
        assertEquals(List.of(3L), recorder.next());
        assertEquals(List.of(1L), recorder.next());
        assertEquals(1, tagOf(old.get(5, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(fresh1.get(5, TimeUnit.SECONDS)));
        assertEquals(3, tagOf(fresh2.get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 21 / B6: cancelling a queued request answers CANCELLED at once; the model never sees it. */
    @Test
    void cancelWhileQueued_modelNeverSeesIt() throws Exception {
        start(model("m", 4, dynamic(0), 1).build());
        occupy();
        CompletableFuture<InferenceResponse> doomed = infer(1);
        CompletableFuture<InferenceResponse> kept = infer(2);
        doomed.cancel(true);
        assertEquals(ErrorCode.CANCELLED, failure(doomed).code());
        recorder.open();
        assertEquals(List.of(2L), recorder.next());
        assertEquals(2, tagOf(kept.get(5, TimeUnit.SECONDS)));
        recorder.assertQuiet(50);
    }

    /** Scenario 23 / B5: max_queue_size with concurrent submitters: exactly the overflow is rejected, at once, with RESOURCE_EXHAUSTED. */
    @Test
    void maxQueueSize_exactlyTheOverflowRejectedAtOnce() throws Exception {
        start(model("m", 4, dynamic(List.of(), 0, false, 0, 0, policy(TimeoutAction.REJECT, 0, false, 5), Map.of()), 1).build());
        CompletableFuture<InferenceResponse> first = occupy();
        List<CompletableFuture<InferenceResponse>> all = new CopyOnWriteArrayList<>();
        CountDownLatch go = new CountDownLatch(1);
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> submits = new ArrayList<>();
            for (int i = 1; i <= 20; i++) {
                long tag = i;
                submits.add(pool.submit(() -> {
                    go.await();
                    all.add(infer(tag));
                    return null;
                }));
            }
            go.countDown();
            for (Future<?> s : submits) {
                s.get(10, TimeUnit.SECONDS);
            }
        }
        List<CompletableFuture<InferenceResponse>> rejected = all.stream().filter(CompletableFuture::isDone).toList();
        assertEquals(15, rejected.size(), "exactly the overflow is rejected, before the instance frees");
        for (CompletableFuture<InferenceResponse> r : rejected) {
            BackplaneException e = failure(r);
            assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
            assertTrue(e.getMessage().contains("max_queue_size 5"), e.getMessage());
        }
        recorder.open();
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        for (CompletableFuture<InferenceResponse> f : all) {
            if (!rejected.contains(f)) {
                f.get(5, TimeUnit.SECONDS);
            }
        }
    }

    /** Scenario 28 / L7: unload with queued requests fails them at once; the executing one ends once; new ones are rejected. */
    @Test
    void unloadWithQueuedRequests_failsThemAtOnce() throws Exception {
        start(model("m", 2, dynamic(0), 1).build());
        CompletableFuture<InferenceResponse> first = occupy();
        List<CompletableFuture<InferenceResponse>> queued = new ArrayList<>();
        for (long t = 1; t <= 10; t++) {
            queued.add(infer(t));
        }
        Thread unloader = Thread.ofVirtual().start(() -> host.unload("m"));
        for (CompletableFuture<InferenceResponse> q : queued) {
            BackplaneException e = failure(q);
            assertEquals(ErrorCode.UNAVAILABLE, e.code());
            assertTrue(e.getMessage().contains("still queued"), e.getMessage());
        }
        assertFalse(first.isDone(), "queued requests failed before the executing one finished");
        recorder.open();
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        unloader.join(Duration.ofSeconds(10));
        BackplaneException late = failure(infer(99));
        assertTrue(late.code() == ErrorCode.UNAVAILABLE || late.code() == ErrorCode.NOT_FOUND, late.toString());
        recorder.assertQuiet(50);
    }

    /** Scenario 12: execute throws a RuntimeException, then an Error: each caller of the batch gets the cause once; the next batch succeeds. */
    @Test
    void executeThrows_eachCallerGetsTheCause_nextBatchSucceeds() throws Exception {
        backend.on("m", (batch, inst) -> {
            List<Long> tags = BatchFixture.tags(batch);
            CountDownLatch gate = recorder.gate;
            recorder.batches.add(tags);
            gate.await();
            if (tags.contains(1L)) {
                throw new IllegalStateException("runtime boom");
            }
            if (tags.contains(3L)) {
                throw new AssertionError("error boom");
            }
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        host = BatchFixture.host(backend).ticker(clock).model(model("m", 4, dynamic(0), 1).build()).loadModel("m").build();
        CompletableFuture<InferenceResponse> first = occupy();
        List<CompletableFuture<InferenceResponse>> a = List.of(infer(1), infer(2));
        recorder.open();
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        for (CompletableFuture<InferenceResponse> f : a) {
            assertTrue(failure(f).getMessage().contains("runtime boom"));
        }
        assertTrue(failure(infer(3)).getMessage().contains("error boom"));
        assertEquals(5, tagOf(infer(5).get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 11: the injected monotonic clock jumps 100 years ahead: a waiting batch leaves at once, a queue timeout fires, nothing overflows. */
    @Test
    void clockJumpsFarAhead_deadlinesStillRight() throws Exception {
        start(model("m", 4, dynamic(List.of(), SECOND_MICROS, false, 2, 1, QueuePolicy.DEFAULT,
                Map.of(2, policy(TimeoutAction.REJECT, 3600 * SECOND_MICROS, false, 0))), 1).build());
        CompletableFuture<InferenceResponse> waiting = infer(1);
        recorder.assertQuiet(30);
        recorder.close();
        clock.advance(Duration.ofDays(365L * 100));
        assertEquals(List.of(1L), recorder.next());
        CompletableFuture<InferenceResponse> timed = host.infer(request("m", 2, 1, 2, 0));
        Thread.sleep(30);
        assertFalse(timed.isDone());
        clock.advance(Duration.ofDays(365L * 100));
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, failure(timed).code());
        recorder.open();
        assertEquals(1, tagOf(waiting.get(5, TimeUnit.SECONDS)));
    }

    /** A batcher-level check: the queue timeout rule on the policy alone. */
    @Test
    void queueTimeoutRule_defaultsAndOverrides() {
        QueuePolicy p = policy(TimeoutAction.REJECT, 500, true, 0);
        assertEquals(500, DynamicBatcher.queueTimeoutMicros(p, FakeRequest.withTimeout(0)));
        assertEquals(100, DynamicBatcher.queueTimeoutMicros(p, FakeRequest.withTimeout(100)));
        assertEquals(500, DynamicBatcher.queueTimeoutMicros(p, FakeRequest.withTimeout(900)));
        assertEquals(500, DynamicBatcher.queueTimeoutMicros(policy(TimeoutAction.REJECT, 500, false, 0), FakeRequest.withTimeout(100)));
        assertEquals(0, DynamicBatcher.queueTimeoutMicros(QueuePolicy.DEFAULT, FakeRequest.withTimeout(100)));
        assertThrows(IllegalArgumentException.class, () -> DynamicBatching.builder().preferredBatchSizes(List.of(0)).build());
    }
}
