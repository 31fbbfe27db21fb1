package io.backplane.core.lifecycle;

import static io.backplane.core.testing.ScriptedBackend.model;
import static io.backplane.core.testing.ScriptedBackend.request;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Many threads and random timing against the lifecycle: infer, stream, cancel, unload, reload
 * and close race; afterwards every request ended exactly once with its own payload, and nothing
 * is left open (L1, L4, L7, L9, L10, B7).
 */
@Timeout(120)
class ConcurrencyTest {

    /** A backend that answers after a random pause, sometimes from another thread, sometimes with an error. */
    private static ScriptedBackend randomBackend() {
        ScriptedBackend b = new ScriptedBackend();
        ScriptedBackend.Script s = (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                ThreadLocalRandom rnd = ThreadLocalRandom.current();
                int mode = rnd.nextInt(10);
                if (rnd.nextInt(4) == 0) {
                    Thread.sleep(0, rnd.nextInt(200_000));
                }
                if (mode == 0) {
                    r.sender().sendError(BackplaneException.invalid("random error for request " + r.id()));
                } else if (mode == 1) {
                    throw new IllegalStateException("random throw");
                } else {
                    r.sender().sendFinal(ScriptedBackend.echo(r));
                }
            }
        };
        b.on("a", s).on("b", s);
        return b;
    }

    private static ModelConfig twoInstances(String name) {
        return model(name, false).toBuilder().instanceGroup(InstanceGroup.of("", 2, InstanceKind.CPU, List.of())).build();
    }

    /**
     * Counts what a client can observe, call by call. A {@link CompletableFuture} swallows a
     * second completion, so the stream half of the callers counts every terminal call at its
     * observer, and a listener counts every release of every accepted request: either shows a
     * request that ended twice.
     */
    private static final class Counts implements HostListener {
        final AtomicInteger accepted = new AtomicInteger();
        final AtomicInteger ended = new AtomicInteger();
        final AtomicInteger doubleCompletions = new AtomicInteger();
        final AtomicInteger callsAfterEnd = new AtomicInteger();

        @Override
        public void requestAccepted(String model, long version) {
            accepted.incrementAndGet();
        }

        @Override
        public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
            ended.incrementAndGet();
        }

        /** An observer that counts every call and completes {@code f} with the first terminal one. */
        ResponseObserver observer(CompletableFuture<InferenceResponse> f) {
            return new ResponseObserver() {
                private final AtomicInteger terminals = new AtomicInteger();
                private final AtomicInteger responses = new AtomicInteger();
                private volatile @Nullable InferenceResponse last;

                @Override
                public void onResponse(InferenceResponse response) {
                    if (terminals.get() > 0 || responses.incrementAndGet() > 1) {
                        callsAfterEnd.incrementAndGet(); // a plain model answers once, before its end
                    }
                    last = response;
                }

                @Override
                public void onComplete() {
                    if (terminals.incrementAndGet() > 1) {
                        doubleCompletions.incrementAndGet();
                    }
                    InferenceResponse r = last;
                    if (r == null) {
                        f.completeExceptionally(new AssertionError("completed without a response"));
                    } else {
                        f.complete(r);
                    }
                }

                @Override
                public void onError(BackplaneException error) {
                    if (terminals.incrementAndGet() > 1) {
                        doubleCompletions.incrementAndGet();
                    }
                    f.completeExceptionally(error);
                }
            };
        }
    }

    @ParameterizedTest(name = "callerRuns={0}")
    @ValueSource(booleans = {false, false, true, true})
    void inferCancelUnloadReload_everyRequestEndsOnceWithItsOwnResult(boolean callerRuns) throws Exception {
        ScriptedBackend backend = randomBackend();
        Counts counts = new Counts();
        BackplaneHost host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).listener(counts)
                .unloadTimeout(Duration.ofMillis(300)).callerRuns(callerRuns).model(twoInstances("a")).model(model("b", false)).loadModel("a").loadModel("b").build();
        int threads = 16;
        int perThread = 300;
        AtomicLong tags = new AtomicLong();
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicInteger wrong = new AtomicInteger();
        List<CompletableFuture<InferenceResponse>> all = java.util.Collections.synchronizedList(new ArrayList<>());
        CountDownLatch startGate = new CountDownLatch(1);
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> callers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            callers.add(Thread.ofPlatform().start(() -> {
                try {
                    startGate.await();
                } catch (InterruptedException e) {
                    return;
                }
                ThreadLocalRandom rnd = ThreadLocalRandom.current();
                for (int i = 0; i < perThread; i++) {
                    long tag = tags.incrementAndGet();
                    String m = rnd.nextBoolean() ? "a" : "b";
                    boolean cancel = rnd.nextInt(20) == 0;
                    CompletableFuture<InferenceResponse> f;
                    if (rnd.nextBoolean()) {
                        f = host.infer(request(m, tag));
                        if (cancel) {
                            f.cancel(true);
                        }
                    } else {
                        f = new CompletableFuture<>();
                        RequestHandle h = host.stream(request(m, tag), counts.observer(f));
                        if (cancel) {
                            h.cancel();
                        }
                    }
                    all.add(f);
                    f.whenComplete((r, e) -> {
                        if (e == null) {
                            if (ScriptedBackend.tagOf(r) != tag) {
                                wrong.incrementAndGet();
                            }
                            ok.incrementAndGet();
                        } else {
                            failed.incrementAndGet();
                        }
                    });
                }
            }));
        }
        Thread chaos = Thread.ofPlatform().start(() -> {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            while (!stop.get()) {
                try {
                    switch (rnd.nextInt(3)) {
                        case 0 -> host.unload("b");
                        case 1 -> host.load("b");
                        default -> host.load("a"); // reload beside the old version
                    }
                    Thread.sleep(rnd.nextInt(5));
                } catch (BackplaneException e) {
                    // a reload may race close; ignore
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        startGate.countDown();
        for (Thread c : callers) {
            c.join();
        }
        stop.set(true);
        chaos.join();
        for (CompletableFuture<InferenceResponse> f : all) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException e) {
                // counted by the callback
            }
        }
        host.close();
        assertEquals(threads * perThread, all.size());
        assertTrue(all.stream().allMatch(CompletableFuture::isDone), "every future completed");
        assertEquals(threads * perThread, ok.get() + failed.get(), "conservation: submitted = ok + failed");
        assertEquals(0, wrong.get(), "no caller got another caller's result");
        assertEquals(0, counts.doubleCompletions.get(), "no stream observer saw two terminal calls");
        assertEquals(0, counts.callsAfterEnd.get(), "no stream observer saw a second response or a response after its end");
        assertEquals(counts.accepted.get(), counts.ended.get(), "every accepted request was released exactly once");
        assertEquals(0, host.openRequests());
        assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get());
        assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get());
        Hygiene.assertNoBackplaneThreads();
    }

    /** Cancel racing FINAL, many times: exactly one terminal state each (B6, L4). */
    @Test
    void cancelRacingFinal_exactlyOneTerminal() throws Exception {
        ScriptedBackend backend = new ScriptedBackend();
        backend.on("d", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            r.sender().send(ScriptedBackend.echo(r), ResponseSender.FINAL);
        });
        BackplaneHost host = BackplaneHost.builder().backend(backend).model(model("d", true)).build();
        int n = 3000;
        AtomicInteger terminals = new AtomicInteger();
        AtomicInteger extra = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(n);
        ConcurrentHashMap<Long, Boolean> ended = new ConcurrentHashMap<>();
        for (int i = 0; i < n; i++) {
            long tag = i;
            ResponseObserver obs = new ResponseObserver() {
                @Override
                public void onResponse(InferenceResponse response) {
                }

                @Override
                public void onComplete() {
                    end();
                }

                @Override
                public void onError(BackplaneException error) {
                    end();
                }

                private void end() {
                    terminals.incrementAndGet();
                    if (ended.putIfAbsent(tag, true) != null) {
                        extra.incrementAndGet();
                    }
                    done.countDown();
                }
            };
            var handle = host.stream(request("d", tag), obs);
            if (i % 2 == 0) {
                Thread.onSpinWait();
            }
            handle.cancel();
        }
        if (!done.await(30, TimeUnit.SECONDS)) {
            fail("requests left open: " + done.getCount());
        }
        host.close();
        assertEquals(n, terminals.get());
        assertEquals(0, extra.get());
        assertEquals(0, host.openRequests());
        Hygiene.assertNoBackplaneThreads();
    }

    /** Request ids come from one counter: pooled callers never collide (B7, SCENARIOS batching 30). */
    @Test
    void requestIds_areUniqueAcrossPooledThreads() throws Exception {
        ScriptedBackend backend = new ScriptedBackend();
        ConcurrentHashMap<Long, Boolean> ids = new ConcurrentHashMap<>();
        AtomicInteger dup = new AtomicInteger();
        backend.on("m", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                if (ids.putIfAbsent(r.id(), true) != null) {
                    dup.incrementAndGet();
                }
                r.sender().sendFinal(ScriptedBackend.echo(r));
            }
        });
        // 4,000 requests may queue at once: no default queue bound
        BackplaneHost host = BackplaneHost.builder().backend(backend).defaultMaxQueueSize(0).model(twoInstances("m")).build();
        try (var pool = java.util.concurrent.Executors.newFixedThreadPool(8)) {
            List<CompletableFuture<InferenceResponse>> fs = new ArrayList<>();
            for (int i = 0; i < 4000; i++) {
                long tag = i;
                fs.add(CompletableFuture.supplyAsync(() -> host.infer(request("m", tag)), pool).thenCompose(f -> f));
            }
            for (CompletableFuture<InferenceResponse> f : fs) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
        host.close();
        assertEquals(4000, ids.size());
        assertEquals(0, dup.get());
        Hygiene.assertNoBackplaneThreads();
    }
}
