package io.backplane.core.lifecycle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A caller blocking on {@code infer(...).get()} or {@code join()} may run its own queued request
 * when an instance is idle (issue 16: no hand-off and no wake-up back). Whatever thread runs it,
 * every request still runs once, on one instance at a time, and ends once; a caller with a
 * timeout never runs a model; unloads racing the callers leave nothing open.
 */
@Timeout(120)
class HelpingJoinTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    private BackplaneHost host;
    private final Set<Long> executed = ConcurrentHashMap.newKeySet();
    /**
     * Batches running per instance, by the instance's identity: after an unload and a load of the same
     * version, the new instance has the old one's name, and may start while the old one's execute is
     * still returning (its requests all ended, so the unload went on): that is not an overlap.
     */
    private final Map<Object, AtomicInteger> running = java.util.Collections.synchronizedMap(new java.util.IdentityHashMap<>());
    private final List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger onCallers = new AtomicInteger();

    @AfterEach
    void close() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "requests left open");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private static ModelConfig model(String name, int instances) {
        return ModelConfig.builder(name).backend(ScriptedBackend.NAME).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).instanceGroup(InstanceGroup.of("", instances, InstanceKind.CPU, List.of())).build();
    }

    /** Echoes, checking that an instance never runs two batches at once and a request never runs twice. */
    private void recordingEcho(String model) {
        backend.on(model, (batch, inst) -> {
            AtomicInteger n = running.computeIfAbsent(inst, k -> new AtomicInteger());
            if (n.incrementAndGet() != 1) {
                violations.add("instance " + inst.name() + " ran two batches at once");
            }
            try {
                if (Thread.currentThread().getName().startsWith("caller-")) {
                    onCallers.incrementAndGet();
                }
                if (ThreadLocalRandom.current().nextInt(8) == 0) {
                    Thread.yield();
                }
                for (ScheduledRequest r : batch) {
                    long tag = r.request().input("IN").toLongArray()[0];
                    if (!executed.add(tag)) {
                        violations.add("request " + tag + " ran twice");
                    }
                    r.sender().sendFinal(ScriptedBackend.echo(r));
                }
            } finally {
                n.decrementAndGet();
            }
        });
    }

    private static void awaitAnswered(AtomicInteger answered, int atLeast) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (answered.get() < atLeast) {
            assertTrue(System.nanoTime() < deadline, "answered " + answered.get() + " of " + atLeast + " within 60 s");
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
        }
    }

    private static ExecutorService callers(int n) {
        AtomicInteger ids = new AtomicInteger();
        return Executors.newFixedThreadPool(n, r -> new Thread(r, "caller-" + ids.incrementAndGet()));
    }

    @Test
    void blockingCallers_randomTiming_everyRequestRunsOnceOnOneThreadAtATime() throws Exception {
        recordingEcho("m");
        host = BackplaneHost.builder().backend(backend).model(model("m", 2)).build();
        int threads = 16;
        int each = 400;
        ExecutorService pool = callers(threads);
        AtomicInteger answered = new AtomicInteger();
        AtomicInteger cancelled = new AtomicInteger();
        try {
            CountDownLatch go = new CountDownLatch(1);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int base = t * each;
                done.add(pool.submit(() -> {
                    go.await();
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    for (int i = 0; i < each; i++) {
                        long tag = base + i;
                        CompletableFuture<InferenceResponse> f = host.infer(ScriptedBackend.request("m", tag));
                        int how = rnd.nextInt(10);
                        if (how == 0) {
                            f.cancel(true);
                            try {
                                assertEquals(tag, ScriptedBackend.tagOf(f.get())); // it had ended before the cancel
                                answered.incrementAndGet();
                            } catch (java.util.concurrent.CancellationException e) {
                                cancelled.incrementAndGet();
                            } catch (ExecutionException e) {
                                assertEquals(ErrorCode.CANCELLED, ((BackplaneException) e.getCause()).code(), e.toString());
                                cancelled.incrementAndGet();
                            }
                            continue;
                        }
                        InferenceResponse r = switch (how) {
                            case 1, 2, 3 -> f.join();
                            case 4 -> f.get(30, TimeUnit.SECONDS);
                            case 5 -> {
                                CountDownLatch l = new CountDownLatch(1);
                                f.whenComplete((x, e) -> l.countDown());
                                assertTrue(l.await(30, TimeUnit.SECONDS));
                                yield f.get();
                            }
                            default -> f.get();
                        };
                        assertEquals(tag, ScriptedBackend.tagOf(r), "the answer of request " + tag);
                        answered.incrementAndGet();
                    }
                    return null;
                }));
            }
            go.countDown();
            for (Future<?> f : done) {
                f.get(90, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
        assertEquals(List.of(), violations);
        assertEquals(threads * each, answered.get() + cancelled.get());
        assertTrue(executed.size() >= answered.get(), "executed " + executed.size() + ", answered " + answered.get());
        assertEquals(0, host.openRequests());
        System.out.printf("[helping-join] %d answered, %d cancelled, %d ran on their caller's thread%n", answered.get(), cancelled.get(), onCallers.get());
    }

    /** A caller that waits with a timeout never runs the model: the run could outlast its timeout. */
    @Test
    void getWithTimeout_neverRunsTheModelOnTheCaller() throws Exception {
        recordingEcho("m");
        host = BackplaneHost.builder().backend(backend).model(model("m", 1)).build();
        ExecutorService pool = callers(1);
        try {
            pool.submit(() -> {
                for (long i = 0; i < 500; i++) {
                    assertEquals(i, ScriptedBackend.tagOf(host.infer(ScriptedBackend.request("m", i)).get(30, TimeUnit.SECONDS)));
                }
                return null;
            }).get(60, TimeUnit.SECONDS);
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
        assertEquals(0, onCallers.get(), "requests run on a caller that waited with a timeout");
        assertEquals(List.of(), violations);
    }

    /**
     * A caller that composes futures and never joins them leaves its request in the quiet queue
     * (no worker was woken for it, since such a caller usually runs its own request): a worker's
     * tick still takes it. Blocking and composing callers interleave at random; every request is
     * answered, exactly once.
     */
    @Test
    void composingCallersThatNeverJoin_areAnsweredByTheWorkers() throws Exception {
        recordingEcho("m");
        host = BackplaneHost.builder().backend(backend).model(model("m", 1)).build();
        ExecutorService pool = callers(3);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                long base = t * 1000L;
                done.add(pool.submit(() -> {
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    for (long i = base; i < base + 150; i++) {
                        long tag = i;
                        CompletableFuture<InferenceResponse> f = host.infer(ScriptedBackend.request("m", tag));
                        if (rnd.nextBoolean()) {
                            assertEquals(tag, ScriptedBackend.tagOf(f.get()));
                            continue;
                        }
                        CountDownLatch answered = new CountDownLatch(1);
                        long[] got = {-1};
                        f.whenComplete((r, e) -> {
                            if (r != null) {
                                got[0] = ScriptedBackend.tagOf(r);
                            }
                            answered.countDown();
                        });
                        assertTrue(answered.await(30, TimeUnit.SECONDS), "composed request " + tag + " was not answered within 30 s");
                        assertEquals(tag, got[0], "the answer of composed request " + tag);
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(90, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
        assertEquals(List.of(), violations);
        assertEquals(450, executed.size(), "requests executed");
        assertEquals(0, host.openRequests());
    }

    /**
     * First come, first served still holds with quiet requests: while the instance runs A, B (whose
     * caller would help) waits quietly and C, queued behind it, is signalled; the worker must run B
     * before C.
     */
    @Test
    void quietRequestThenSignalledOne_runInArrivalOrder() throws Exception {
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        List<Long> order = java.util.Collections.synchronizedList(new ArrayList<>());
        backend.on("m", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                long tag = r.request().input("IN").toLongArray()[0];
                order.add(tag);
                if (tag == 0) {
                    entered.countDown();
                    assertTrue(release.await(30, TimeUnit.SECONDS));
                }
                r.sender().sendFinal(ScriptedBackend.echo(r));
            }
        });
        host = BackplaneHost.builder().backend(backend).model(model("m", 1)).build();
        CompletableFuture<InferenceResponse> a = host.infer(ScriptedBackend.request("m", 0));
        assertTrue(entered.await(30, TimeUnit.SECONDS));
        CompletableFuture<InferenceResponse> b = host.infer(ScriptedBackend.request("m", 1));
        CompletableFuture<InferenceResponse> c = host.infer(ScriptedBackend.request("m", 2));
        release.countDown();
        CompletableFuture.allOf(a, b, c).get(30, TimeUnit.SECONDS);
        assertEquals(List.of(0L, 1L, 2L), order, "execution order");
    }

    /** Unloads and reloads race blocking callers: each request is answered or refused once, and nothing stays open. */
    @Test
    void unloadsRacingHelpingCallers_everyRequestEndsOnce() throws Exception {
        recordingEcho("m");
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(10))
                .model(model("m", 2)).loadModel("m").build();
        int threads = 8;
        ExecutorService pool = callers(threads);
        AtomicInteger answered = new AtomicInteger();
        AtomicInteger refused = new AtomicInteger();
        AtomicInteger sent = new AtomicInteger();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        try {
            CountDownLatch go = new CountDownLatch(1);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long base = t * 1_000_000L;
                done.add(pool.submit(() -> {
                    go.await();
                    for (long tag = base; !stop.get(); tag++) {
                        sent.incrementAndGet();
                        try {
                            InferenceResponse r = ThreadLocalRandom.current().nextBoolean() ? host.infer(ScriptedBackend.request("m", tag)).get()
                                    : host.infer(ScriptedBackend.request("m", tag)).join();
                            assertEquals(tag, ScriptedBackend.tagOf(r));
                            answered.incrementAndGet();
                        } catch (ExecutionException | java.util.concurrent.CompletionException e) {
                            BackplaneException b = (BackplaneException) e.getCause();
                            assertTrue(b.code() == ErrorCode.UNAVAILABLE || b.code() == ErrorCode.NOT_FOUND || b.code() == ErrorCode.CANCELLED,
                                    b.toString());
                            refused.incrementAndGet();
                        }
                    }
                    return null;
                }));
            }
            go.countDown();
            for (int k = 1; k <= 7; k++) {
                awaitAnswered(answered, k * 200); // the churn waits for traffic between its unloads
                if (k < 7) {
                    host.unload("m");
                    host.load("m");
                }
            }
            stop.set(true);
            for (Future<?> f : done) {
                f.get(90, TimeUnit.SECONDS);
            }
        } finally {
            stop.set(true);
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
        assertEquals(List.of(), violations);
        assertEquals(sent.get(), answered.get() + refused.get());
        assertEquals(0, host.openRequests());
        assertFalse(executed.isEmpty());
    }
}
