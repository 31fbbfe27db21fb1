package io.backplane.core.lifecycle;

import static io.backplane.core.testing.ScriptedBackend.model;
import static io.backplane.core.testing.ScriptedBackend.request;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * DESIGN P9, the core's part: {@link ResponseSender#ready()} follows the stream observer's
 * {@link ResponseObserver#ready()}, and completes whenever the sender closes (FINAL, unload), even
 * if the observer never becomes ready, so a backend waiting on it never waits forever.
 */
@Timeout(60)
class FlowControlTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    private final LinkedBlockingQueue<ResponseSender> senders = new LinkedBlockingQueue<>();
    private BackplaneHost host;

    private BackplaneHost start() {
        backend.on("m", (batch, inst) -> {
            ResponseSender s = batch.getFirst().sender();
            s.send(ScriptedBackend.echo(batch.getFirst()), 0);
            senders.add(s); // held open: the test closes it
        });
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofMillis(200))
                .model(model("m", true)).loadModel("m").build();
        return host;
    }

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private ResponseSender stream(ResponseObserver observer) throws InterruptedException {
        host.stream(request("m", 1), observer);
        ResponseSender s = senders.poll(10, TimeUnit.SECONDS);
        assertTrue(s != null, "the backend got the request");
        return s;
    }

    private static boolean done(CompletionStage<Void> stage) {
        return stage.toCompletableFuture().isDone();
    }

    @Test
    void ready_followsTheObserver() throws Exception {
        start();
        Gated observer = new Gated();
        ResponseSender s = stream(observer);
        CompletionStage<Void> first = s.ready();
        CompletionStage<Void> second = s.ready();
        assertFalse(done(first), "the observer is not ready");
        observer.open();
        assertTrue(done(first) && done(second), "the observer became ready");
        assertTrue(done(s.ready()), "a ready observer: ready at once");
        s.send(null, ResponseSender.FINAL);
        assertTrue(observer.ended.await(10, TimeUnit.SECONDS));
    }

    @Test
    void ready_observerNeverReady_completesOnFinal() throws Exception {
        start();
        Gated observer = new Gated();
        ResponseSender s = stream(observer);
        List<CompletionStage<Void>> waiting = List.of(s.ready(), s.ready(), s.ready());
        assertFalse(done(waiting.getFirst()));
        s.send(null, ResponseSender.FINAL);
        for (CompletionStage<Void> w : waiting) {
            assertTrue(done(w), "the sender closed: nothing waits on it");
        }
        assertTrue(done(s.ready()), "a closed sender is ready at once");
        assertEquals(3, observer.pending(), "the observer never became ready: the core ended the waits itself");
    }

    @Test
    void ready_observerNeverReady_completesWhenUnloadEndsTheRequest_L7() throws Exception {
        start();
        Gated observer = new Gated();
        ResponseSender s = stream(observer);
        CompletionStage<Void> w = s.ready();
        assertFalse(done(w));
        host.unload("m"); // fails the held request after its 200 ms deadline
        assertTrue(done(w), "unload closed the sender");
        assertTrue(observer.ended.await(10, TimeUnit.SECONDS));
    }

    @Test
    void ready_observerThrows_takenAsReady() throws Exception {
        start();
        ResponseSender s = stream(new Gated() {
            @Override
            public CompletionStage<Void> ready() {
                throw new IllegalStateException("broken observer");
            }
        });
        assertTrue(done(s.ready()), "a broken observer never makes a backend wait");
        s.send(null, ResponseSender.FINAL);
    }

    /**
     * The race: {@code ready()} registers a waiter while another thread closes the sender. If the
     * close read the waiters before the registration and the registration read "open" before the
     * close, that waiter would never complete. 200 rounds, 4 callers, random timing.
     */
    @Test
    void ready_racingClose_neverLeavesAWaiter() throws Exception {
        start();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            for (int round = 0; round < 200; round++) {
                Gated observer = new Gated();
                ResponseSender s = stream(observer);
                ConcurrentLinkedQueue<CompletionStage<Void>> stages = new ConcurrentLinkedQueue<>();
                CountDownLatch gate = new CountDownLatch(1);
                AtomicBoolean closed = new AtomicBoolean();
                List<Future<?>> callers = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    callers.add(pool.submit(() -> {
                        gate.await();
                        while (!closed.get()) {
                            stages.add(s.ready());
                        }
                        stages.add(s.ready());
                        return null;
                    }));
                }
                gate.countDown();
                for (int spin = ThreadLocalRandom.current().nextInt(2000); spin > 0; spin--) {
                    Thread.onSpinWait();
                }
                s.send(null, ResponseSender.FINAL);
                closed.set(true);
                for (Future<?> c : callers) {
                    c.get(10, TimeUnit.SECONDS);
                }
                int round0 = round;
                assertTrue(stages.stream().allMatch(FlowControlTest::done), () -> "round " + round0 + ": a ready() stage outlived the close");
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    /** An observer whose consumer is stalled until {@link #open}. */
    private static class Gated implements ResponseObserver {
        private final ConcurrentLinkedQueue<CompletableFuture<Void>> gates = new ConcurrentLinkedQueue<>();
        private volatile boolean open;
        final CountDownLatch ended = new CountDownLatch(1);
        final AtomicInteger responses = new AtomicInteger();

        void open() {
            open = true;
            CompletableFuture<Void> g;
            while ((g = gates.poll()) != null) {
                g.complete(null);
            }
        }

        int pending() {
            return (int) gates.stream().filter(g -> !g.isDone()).count();
        }

        @Override
        public CompletionStage<Void> ready() {
            if (open) {
                return CompletableFuture.completedStage(null);
            }
            CompletableFuture<Void> g = new CompletableFuture<>();
            gates.add(g);
            return g;
        }

        @Override
        public void onResponse(InferenceResponse response) {
            responses.incrementAndGet();
        }

        @Override
        public void onComplete() {
            ended.countDown();
        }

        @Override
        public void onError(BackplaneException error) {
            ended.countDown();
        }
    }
}
