package io.backplane.core.composition;

import static io.backplane.core.testing.ScriptedBackend.model;
import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Composition invariants C1 and C2 for child requests ({@link ScheduledRequest#startChild}), any backend. */
@Timeout(60)
class ChildRequestsTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    private BackplaneHost host;

    private BackplaneHost start() {
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofMillis(500))
                .model(model("parent", false)).loadModel("parent").model(model("child", false)).loadModel("child").build();
        return host;
    }

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    /** Records an observer's calls; {@code end} completes with null (complete) or the error. */
    static final class Recorder implements ResponseObserver {
        final List<Object> calls = new CopyOnWriteArrayList<>();
        final CompletableFuture<BackplaneException> end = new CompletableFuture<>();

        @Override
        public void onResponse(InferenceResponse response) {
            calls.add(response);
        }

        @Override
        public void onComplete() {
            calls.add("complete");
            end.complete(null);
        }

        @Override
        public void onError(BackplaneException error) {
            calls.add(error);
            end.complete(error);
        }
    }

    private static BackplaneException failure(CompletableFuture<?> f) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        return assertInstanceOf(BackplaneException.class, e.getCause());
    }

    @Test
    void child_answered_parentGetsItsResponse() throws Exception {
        backend.on("parent", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            Recorder rec = new Recorder();
            r.startChild(request("child", tagOf(ScriptedBackend.echo(r)) * 10), rec);
            assertEquals(null, rec.end.get(10, TimeUnit.SECONDS));
            r.sender().sendFinal((InferenceResponse) rec.calls.getFirst());
        });
        start();
        assertEquals(70, tagOf(host.infer(request("parent", 7)).get(10, TimeUnit.SECONDS)));
    }

    @Test
    void parentEnds_openChildCancelled_observerGetsOneCancelledAndNothingAfter_C1() throws Exception {
        CountDownLatch childRuns = new CountDownLatch(1);
        CountDownLatch releaseChild = new CountDownLatch(1);
        AtomicReference<Boolean> childSawCancel = new AtomicReference<>();
        Recorder rec = new Recorder();
        backend.on("child", (batch, inst) -> {
            childRuns.countDown();
            releaseChild.await();
            ScheduledRequest r = batch.getFirst();
            childSawCancel.set(r.isCancelled());
            r.sender().sendFinal(ScriptedBackend.echo(r)); // arrives after the parent ended: must not reach it
        });
        backend.on("parent", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            r.startChild(request("child", 1), rec);
            childRuns.await();
            r.sender().sendFinal(ScriptedBackend.echo(r));
        });
        start();
        assertEquals(5, tagOf(host.infer(request("parent", 5)).get(10, TimeUnit.SECONDS)));
        BackplaneException e = rec.end.get(10, TimeUnit.SECONDS);
        assertEquals(ErrorCode.CANCELLED, e.code());
        assertTrue(e.getMessage().contains("its parent request #"), e.getMessage());
        releaseChild.countDown();
        awaitNoOpenRequests();
        assertEquals(Boolean.TRUE, childSawCancel.get());
        assertEquals(1, rec.calls.size(), "one terminal call and nothing after it: " + rec.calls);
    }

    /**
     * Regression (race found here): the child's worker may run it before {@code startChild} has
     * stored the child in its link; a parent cancel in that window found no child to cancel, and
     * the child waited forever. The link now records the cancel and {@code startChild} replays it.
     */
    @RepeatedTest(20)
    void parentCancelledWhileWaiting_childCancelled_parentEnds_C1() throws Exception {
        CountDownLatch childRuns = new CountDownLatch(1);
        backend.on("child", (batch, inst) -> {
            childRuns.countDown();
            ScheduledRequest r = batch.getFirst();
            while (!r.isCancelled()) {
                Thread.onSpinWait();
            }
            r.sender().sendError(new BackplaneException(ErrorCode.CANCELLED, "child saw the cancellation"));
        });
        backend.on("parent", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            Recorder rec = new Recorder();
            r.startChild(request("child", 1), rec);
            BackplaneException e = rec.end.get(30, TimeUnit.SECONDS);
            r.sender().sendError(e);
        });
        start();
        CompletableFuture<InferenceResponse> f = host.infer(request("parent", 1));
        assertTrue(childRuns.await(10, TimeUnit.SECONDS));
        f.cancel(true);
        awaitNoOpenRequests();
    }

    @Test
    void callToItself_onlyInstanceHeld_failsUnavailable_C2() throws Exception {
        AtomicReference<BackplaneException> got = new AtomicReference<>();
        backend.on("parent", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            if (tagOf(ScriptedBackend.echo(r)) == 0) {
                r.sender().sendFinal(ScriptedBackend.echo(r));
                return;
            }
            Recorder rec = new Recorder();
            r.startChild(request("parent", 0), rec);
            got.set(rec.end.get(10, TimeUnit.SECONDS));
            r.sender().sendFinal(ScriptedBackend.echo(r));
        });
        start();
        assertEquals(1, tagOf(host.infer(request("parent", 1)).get(10, TimeUnit.SECONDS)));
        assertEquals(ErrorCode.UNAVAILABLE, got.get().code());
        assertTrue(got.get().getMessage().contains("(its own model) but all 1 instance(s)"), got.get().getMessage());
        assertEquals(0, tagOf(host.infer(request("parent", 0)).get(10, TimeUnit.SECONDS)), "the model still serves");
    }

    @Test
    void callerRunsHost_childNeverRunsOnItsCallersThread() throws Exception {
        AtomicReference<Thread> parentThread = new AtomicReference<>();
        AtomicReference<Thread> childThread = new AtomicReference<>();
        backend.on("child", (batch, inst) -> {
            childThread.set(Thread.currentThread());
            batch.getFirst().sender().sendFinal(ScriptedBackend.echo(batch.getFirst()));
        });
        backend.on("parent", (batch, inst) -> {
            parentThread.set(Thread.currentThread());
            ScheduledRequest r = batch.getFirst();
            Recorder rec = new Recorder();
            r.startChild(request("child", 3), rec);
            assertEquals(null, rec.end.get(10, TimeUnit.SECONDS));
            r.sender().sendFinal((InferenceResponse) rec.calls.getFirst());
        });
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).callerRuns(true)
                .model(model("parent", false)).loadModel("parent").model(model("child", false)).loadModel("child").build();
        assertEquals(3, tagOf(host.infer(request("parent", 1)).get(10, TimeUnit.SECONDS)));
        assertTrue(childThread.get() != parentThread.get(), "the child ran on its caller's thread " + parentThread.get());
    }

    @Test
    void childToUnknownModel_errorBeforeStartChildReturns() throws Exception {
        AtomicReference<List<Object>> calls = new AtomicReference<>();
        backend.on("parent", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            Recorder rec = new Recorder();
            r.startChild(request("nowhere", 1), rec);
            calls.set(List.copyOf(rec.calls));
            r.sender().sendFinal(ScriptedBackend.echo(r));
        });
        start();
        host.infer(request("parent", 1)).get(10, TimeUnit.SECONDS);
        BackplaneException e = (BackplaneException) calls.get().getFirst();
        assertEquals(ErrorCode.NOT_FOUND, e.code());
        assertTrue(e.getMessage().contains("Request for unknown model: 'nowhere' is not found"), e.getMessage());
    }

    @Test
    void startChild_afterParentEnded_throwsIllegalState() throws Exception {
        AtomicReference<ScheduledRequest> parent = new AtomicReference<>();
        backend.on("parent", (batch, inst) -> {
            parent.set(batch.getFirst());
            batch.getFirst().sender().sendFinal(ScriptedBackend.echo(batch.getFirst()));
        });
        start();
        host.infer(request("parent", 1)).get(10, TimeUnit.SECONDS);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> parent.get().startChild(request("child", 1), new Recorder()));
        assertTrue(e.getMessage().contains("has ended"), e.getMessage());
    }

    private void awaitNoOpenRequests() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (host.openRequests() != 0) {
            assertTrue(System.nanoTime() < deadline, "requests stayed open: " + host.openRequests());
            Thread.sleep(2);
        }
    }
}
