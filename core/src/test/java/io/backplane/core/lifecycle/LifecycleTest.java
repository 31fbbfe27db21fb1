package io.backplane.core.lifecycle;

import static io.backplane.core.testing.ScriptedBackend.model;
import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.host.ResponseObserver;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The lifecycle invariants L1–L10 of DESIGN.md, driven through a backend that misbehaves on
 * purpose. Each test names the invariant it proves.
 */
@Timeout(60)
class LifecycleTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    private BackplaneHost host;

    private BackplaneHost start(boolean decoupled, String... extra) {
        BackplaneHost.Builder b = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT)
                .unloadTimeout(Duration.ofMillis(500)).restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50))
                .model(model("m", decoupled)).loadModel("m");
        for (String e : extra) {
            b.model(model(e, false)).loadModel(e);
        }
        host = b.build();
        return host;
    }

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
            assertEquals(backend.backendsCreated.get(), backend.backendsClosed.get(), "every backend closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private static BackplaneException failure(CompletableFuture<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        return assertInstanceOf(BackplaneException.class, e.getCause());
    }

    @Test
    void echo_eachCallerGetsItsOwnResult_L1() throws Exception {
        start(false);
        for (long tag = 1; tag <= 100; tag++) {
            assertEquals(tag, tagOf(host.infer(request("m", tag)).get(5, TimeUnit.SECONDS)));
        }
    }

    @Test
    void sendAfterFinal_throwsNamingRequest_andClientSeesOneResponse_L2() throws Exception {
        AtomicReference<Throwable> second = new AtomicReference<>();
        CountDownLatch tried = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            r.sender().sendFinal(ScriptedBackend.echo(r));
            try {
                r.sender().sendFinal(ScriptedBackend.echo(r));
            } catch (IllegalStateException e) {
                second.set(e);
            } finally {
                tried.countDown();
            }
        });
        start(false);
        assertEquals(7, tagOf(host.infer(request("m", 7)).get(5, TimeUnit.SECONDS)));
        assertTrue(tried.await(5, TimeUnit.SECONDS));
        assertInstanceOf(IllegalStateException.class, second.get());
        assertTrue(second.get().getMessage().contains("request #") && second.get().getMessage().contains("is closed"), second.get().getMessage());
    }

    @Test
    void plainModel_nonFinalSend_throws_thenCoreAnswersMissingResponse_L2_L6() throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        backend.on("m", (batch, inst) -> {
            try {
                batch.getFirst().sender().send(ScriptedBackend.echo(batch.getFirst()), 0);
            } catch (IllegalStateException e) {
                thrown.set(e);
            }
        });
        start(false);
        BackplaneException e = failure(host.infer(request("m", 1)));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("without answering"), e.getMessage());
        assertTrue(thrown.get().getMessage().contains("not decoupled"), thrown.get().getMessage());
    }

    @Test
    void plainModel_finalWithoutResponse_throws_L2() throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        backend.on("m", (batch, inst) -> {
            try {
                batch.getFirst().sender().send(null, ResponseSender.FINAL);
            } catch (IllegalStateException e) {
                thrown.set(e);
            }
        });
        start(false);
        assertEquals(ErrorCode.INTERNAL, failure(host.infer(request("m", 1))).code());
        assertInstanceOf(IllegalStateException.class, thrown.get());
    }

    @Test
    void decoupled_doubleFinal_secondThrows_observerSeesOneTerminal_L2() throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        CountDownLatch tried = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            ResponseSender s = batch.getFirst().sender();
            s.send(ScriptedBackend.echo(batch.getFirst()), 0);
            s.send(null, ResponseSender.FINAL);
            try {
                s.send(null, ResponseSender.FINAL);
            } catch (IllegalStateException e) {
                thrown.set(e);
            } finally {
                tried.countDown();
            }
        });
        start(true);
        Recorder rec = new Recorder();
        host.stream(request("m", 3), rec);
        rec.await();
        assertTrue(tried.await(5, TimeUnit.SECONDS));
        assertEquals(1, rec.responses.size());
        assertEquals(1, rec.terminals.get());
        assertInstanceOf(IllegalStateException.class, thrown.get());
    }

    @Test
    void executeThrowsAfterClosingSome_errorGoesOnlyToOpenRequests_L5() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            ScheduledRequest first = batch.getFirst();
            if (ScriptedBackend.tagOf(ScriptedBackend.echo(first)) % 2 == 0) {
                first.sender().sendFinal(ScriptedBackend.echo(first));
            }
            gate.countDown();
            throw new IllegalArgumentException("boom after answering");
        });
        start(false);
        assertEquals(2, tagOf(host.infer(request("m", 2)).get(5, TimeUnit.SECONDS)));
        BackplaneException e = failure(host.infer(request("m", 3)));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("boom after answering"), e.getMessage());
        for (int i = 0; i < 10; i++) {
            assertEquals(ErrorCode.INTERNAL, failure(host.infer(request("m", 5))).code());
        }
        assertTrue(host.isModelReady("m"), "an execute error leaves the model ready");
    }

    @Test
    void returnsWithoutResponding_coreAnswersInternalError_L6() {
        backend.on("m", (batch, inst) -> { });
        start(false);
        BackplaneException e = failure(host.infer(request("m", 1)));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("without answering request #"), e.getMessage());
    }

    @Test
    void senderHeldForever_unloadFinishesWithinDeadline_andFailsIt_L7() throws Exception {
        List<ResponseSender> held = new CopyOnWriteArrayList<>();
        CountDownLatch executed = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            held.add(batch.getFirst().sender());
            executed.countDown();
        });
        start(true);
        Recorder rec = new Recorder();
        host.stream(request("m", 1), rec);
        assertTrue(executed.await(5, TimeUnit.SECONDS));
        host.unload("m"); // the class-level @Timeout fails the test if unload ignored its 500 ms deadline
        rec.await();
        assertEquals(ErrorCode.UNAVAILABLE, rec.error.get().code());
        assertTrue(rec.error.get().getMessage().contains("unloaded before the request finished"), rec.error.get().getMessage());
        assertThrows(IllegalStateException.class, () -> held.getFirst().send(null, ResponseSender.FINAL), "the sender is closed after forced unload");
        assertEquals(1, backend.modelsClosed.get());
    }

    @Test
    void finalReleasesHoldAtOnce_evenWhileSenderIsReferenced_L3() throws Exception {
        List<ResponseSender> kept = new CopyOnWriteArrayList<>();
        backend.on("m", (batch, inst) -> {
            ResponseSender s = batch.getFirst().sender();
            kept.add(s);
            s.send(ScriptedBackend.echo(batch.getFirst()), ResponseSender.FINAL);
        });
        // An unload deadline far beyond the test's @Timeout: only a released hold lets unload return in time.
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofMinutes(10))
                .model(model("m", true)).loadModel("m").build();
        Recorder rec = new Recorder();
        host.stream(request("m", 4), rec);
        rec.await();
        assertEquals(null, rec.error.get());
        assertEquals(0, host.openRequests(), "no hold after FINAL although the backend still references the sender");
        host.unload("m");
        assertEquals(1, kept.size());
    }

    @Test
    void decoupled_answersFromAnotherThreadAfterExecuteReturned() throws Exception {
        backend.on("m", (batch, inst) -> {
            ScheduledRequest r = batch.getFirst();
            Thread.ofPlatform().start(() -> {
                for (int i = 0; i < 3; i++) {
                    r.sender().send(ScriptedBackend.echo(r), 0);
                }
                r.sender().send(ScriptedBackend.echo(r), ResponseSender.FINAL);
            });
        });
        start(true);
        Recorder rec = new Recorder();
        host.stream(request("m", 9), rec);
        rec.await();
        assertEquals(4, rec.responses.size());
        assertEquals(1, rec.terminals.get());
        assertEquals(null, rec.error.get());
    }

    @Test
    void throwsInLoad_loadFailsClearly_otherModelsKeepServing_L9() throws Exception {
        start(false, "other");
        backend.failLoad = new IllegalStateException("cannot read weights");
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("m"));
        assertTrue(e.getMessage().contains("cannot read weights"), e.getMessage());
        backend.failLoad = null;
        assertEquals(5, tagOf(host.infer(request("m", 5)).get(5, TimeUnit.SECONDS)), "the old version keeps serving after a failed reload");
        assertEquals(6, tagOf(host.infer(request("other", 6)).get(5, TimeUnit.SECONDS)));
    }

    @Test
    void reload_requestsQueuedOnTheOldVersionStillSucceed_L9() throws Exception {
        backend.on("m", (batch, inst) -> {
            Thread.sleep(20);
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        start(false);
        List<CompletableFuture<InferenceResponse>> queued = new java.util.ArrayList<>();
        for (long t = 0; t < 10; t++) {
            queued.add(host.infer(request("m", t)));
        }
        host.load("m"); // reload: the new version loads beside, then the old one drains its queue
        for (long t = 0; t < 10; t++) {
            assertEquals(t, tagOf(queued.get((int) t).get(5, TimeUnit.SECONDS)));
        }
        assertEquals(3, tagOf(host.infer(request("m", 3)).get(5, TimeUnit.SECONDS)));
    }

    @Test
    void throwsInCreateInstance_loadFails_andModelIsClosed() {
        backend.failCreateInstance = new IllegalStateException("no device");
        BackplaneHost.Builder b = BackplaneHost.builder().backend(backend).model(model("m", false)).loadModel("m");
        BackplaneException e = assertThrows(BackplaneException.class, b::build);
        assertTrue(e.getMessage().contains("no device"), e.getMessage());
        assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get());
    }

    @Test
    void throwsInClose_unloadStillCompletes() throws Exception {
        start(false);
        backend.failClose = new IllegalStateException("close failed");
        host.unload("m");
        assertFalse(host.isModelReady("m"));
        assertEquals(ErrorCode.UNAVAILABLE, failure(host.infer(request("m", 1))).code());
    }

    @Test
    void blocksInExecute_unloadFinishesWithinDeadline_L7() throws Exception {
        CountDownLatch entered = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            entered.countDown();
            Thread.sleep(60_000);
        });
        start(false);
        CompletableFuture<InferenceResponse> f = host.infer(request("m", 1));
        CompletableFuture<InferenceResponse> queued = host.infer(request("m", 2));
        assertTrue(entered.await(5, TimeUnit.SECONDS));
        host.unload("m"); // bounded by its 500 ms deadline; the class-level @Timeout catches a hang
        assertEquals(ErrorCode.UNAVAILABLE, failure(f).code());
        BackplaneException q = failure(queued);
        assertTrue(q.getMessage().contains("still queued"), q.getMessage());
    }

    @Test
    void unload_rejectsNewRequestsAtOnce_L7() throws Exception {
        start(false);
        host.unload("m");
        BackplaneException e = failure(host.infer(request("m", 1)));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("'m'"), e.getMessage());
    }

    @Test
    void instanceReportsFailure_batchFailsOnce_restarts_nextRequestSucceeds_L8() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        backend.on("m", (batch, inst) -> {
            if (calls.incrementAndGet() == 1) {
                inst.reportFailure(new IllegalStateException("stub died"));
                inst.reportFailure(new IllegalStateException("stub died again")); // idempotent
                return;
            }
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        start(false);
        BackplaneException e = failure(host.infer(request("m", 1)));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("stub died") && e.getMessage().contains("instance 'm_0_0'"), e.getMessage());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (backend.instancesCreated.get() < 2 && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(2, backend.instancesCreated.get(), "a replacement instance was created");
        assertEquals(11, tagOf(host.infer(request("m", 11)).get(5, TimeUnit.SECONDS)));
    }

    /** SCENARIOS batching 14: a hung execute is failed by the watchdog; other instances keep serving; the instance comes back. */
    @Test
    void executeHangs_watchdogFailsTheBatch_otherInstanceServes_L8() throws Exception {
        CountDownLatch hung = new CountDownLatch(1);
        backend.on("w", (batch, inst) -> {
            if (ScriptedBackend.tagOf(ScriptedBackend.echo(batch.getFirst())) == 1) {
                hung.countDown();
                Thread.sleep(60_000);
            }
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        host = BackplaneHost.builder().backend(backend).restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50))
                .model(model("w", false).toBuilder().parameter("execute_timeout_ms", "300")
                        .instanceGroup(io.backplane.spi.config.InstanceGroup.of("", 2, io.backplane.spi.config.InstanceKind.CPU, List.of())).build())
                .build();
        CompletableFuture<InferenceResponse> stuck = host.infer(request("w", 1));
        assertTrue(hung.await(5, TimeUnit.SECONDS));
        assertEquals(2, tagOf(host.infer(request("w", 2)).get(5, TimeUnit.SECONDS)), "the other instance serves meanwhile");
        BackplaneException e = failure(stuck);
        assertTrue(e.getMessage().contains("execute_timeout_ms"), e.getMessage());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (backend.instancesCreated.get() < 3 && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(3, backend.instancesCreated.get(), "the hung instance was replaced");
        for (long t = 10; t < 20; t++) {
            assertEquals(t, tagOf(host.infer(request("w", t)).get(5, TimeUnit.SECONDS)));
        }
    }

    @Test
    void executeTimeoutParameter_badValue_failsLoadClearly() {
        BackplaneHost.Builder b = BackplaneHost.builder().backend(backend)
                .model(model("w", false).toBuilder().parameter("execute_timeout_ms", "soon").build()).modelControlMode(ModelControlMode.EXPLICIT).loadModel("w");
        BackplaneException e = assertThrows(BackplaneException.class, b::build);
        assertTrue(e.getMessage().contains("execute_timeout_ms is 'soon'"), e.getMessage());
    }

    @Test
    void readinessProbes_concurrentWithInference_neverDisturbIt() throws Exception {
        start(false);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        AtomicInteger notReady = new AtomicInteger();
        List<Thread> probes = new java.util.ArrayList<>();
        for (int p = 0; p < 4; p++) {
            probes.add(Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    if (!host.isModelReady("m") || !host.isReady()) {
                        notReady.incrementAndGet();
                    }
                }
            }));
        }
        for (long t = 0; t < 2000; t++) {
            assertEquals(t, tagOf(host.infer(request("m", t)).get(5, TimeUnit.SECONDS)));
        }
        stop.set(true);
        for (Thread p : probes) {
            p.join();
        }
        assertEquals(0, notReady.get());
    }

    @Test
    void instanceNotReady_modelNotReady_L8() throws Exception {
        start(false);
        assertTrue(host.isModelReady("m"));
        backend.ready = false;
        assertFalse(host.isModelReady("m"));
        assertFalse(host.isReady());
        backend.ready = true;
        assertTrue(host.isReady());
    }

    @Test
    void instanceOwnReadinessCheck_decidesModelAndStrictServerReadiness() throws Exception {
        start(false);
        java.util.concurrent.atomic.AtomicInteger asked = new java.util.concurrent.atomic.AtomicInteger();
        backend.readyCheck = () -> {
            asked.incrementAndGet();
            return java.util.concurrent.CompletableFuture.completedFuture(false);
        };
        assertFalse(host.isModelReady("m"), "the instance's own check says not ready");
        assertFalse(host.isReady(), "strict readiness: a model not ready makes the host not ready");
        assertTrue(asked.get() >= 2, "each query asked the instance");
        assertEquals(1, tagOf(host.infer(request("m", 1)).get(5, TimeUnit.SECONDS)), "readiness does not stop serving");
        backend.readyCheck = () -> java.util.concurrent.CompletableFuture.failedFuture(new IllegalStateException("broken"));
        assertFalse(host.isModelReady("m"), "a check that fails counts as not ready");
        backend.readyCheck = () -> null;
        assertFalse(host.isModelReady("m"), "a null stage counts as not ready");
        backend.readyCheck = () -> {
            throw new IllegalStateException("thrown");
        };
        assertFalse(host.isModelReady("m"), "a check that throws counts as not ready");
        java.util.concurrent.CompletableFuture<Boolean> later = new java.util.concurrent.CompletableFuture<>();
        backend.readyCheck = () -> later;
        java.util.concurrent.CompletableFuture<Boolean> pending = host.checkModelReady("m", io.backplane.spi.InferenceRequest.LATEST);
        assertFalse(pending.isDone(), "checkModelReady does not block: it waits for the instance's answer");
        later.complete(true);
        assertTrue(pending.get(5, TimeUnit.SECONDS));
        backend.readyCheck = () -> java.util.concurrent.CompletableFuture.completedFuture(true);
        assertTrue(host.isModelReady("m"));
        assertTrue(host.isReady());
        backend.ready = false;
        asked.set(0);
        backend.readyCheck = () -> {
            asked.incrementAndGet();
            return java.util.concurrent.CompletableFuture.completedFuture(true);
        };
        assertFalse(host.isModelReady("m"), "an instance that is not ready (its process is down) is not ready whatever its check says");
        assertEquals(1, asked.get(), "it is asked all the same, so that it can say why");
        backend.ready = true;
        backend.readyCheck = null;
        assertTrue(host.isModelReady("m"), "without a check of its own the instance's isReady() answers");
    }

    /**
     * Triton's line for a model whose instances cannot serve: the reason an instance's check
     * fails with (a BackplaneException's message) is logged once per readiness query, and only
     * while no instance is ready; a check that fails otherwise logs nothing at INFO.
     */
    @Test
    void instanceNotReadyWithReason_loggedOncePerQuery_L8() throws Exception {
        start(false);
        ch.qos.logback.classic.Logger versionLog = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory
                .getLogger("io.backplane.core.internal.ModelVersion");
        ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logged = new ch.qos.logback.core.read.ListAppender<>();
        logged.list = new CopyOnWriteArrayList<>();
        logged.start();
        ch.qos.logback.classic.Level level = versionLog.getLevel();
        versionLog.setLevel(ch.qos.logback.classic.Level.INFO); // the line is INFO; this module's tests log from WARN
        versionLog.addAppender(logged);
        try {
            String line = "Model 'm' version 1 is not ready: Stub process 'm_0_0' is not healthy.";
            backend.ready = false;
            backend.readyCheck = () -> CompletableFuture.failedFuture(BackplaneException.unavailable("Stub process 'm_0_0' is not healthy."));
            for (int q = 1; q <= 3; q++) {
                assertFalse(host.isModelReady("m"));
                int n = q;
                assertEquals(n, logged.list.stream().filter(e -> e.getFormattedMessage().equals(line)).count(), "one line per query");
            }
            backend.readyCheck = () -> CompletableFuture.failedFuture(new IllegalStateException("no reason a client may read"));
            int before = logged.list.size();
            assertFalse(host.isModelReady("m"));
            assertEquals(before, logged.list.size(), "a failure that is not a BackplaneException gives no reason");
            backend.ready = true;
            backend.readyCheck = () -> CompletableFuture.completedFuture(true);
            assertTrue(host.isModelReady("m"));
            assertEquals(before, logged.list.size(), "nothing is logged while the model is ready");
        } finally {
            versionLog.detachAppender(logged);
            versionLog.setLevel(level);
        }
    }

    @Test
    void strictReadinessOff_hostReadyWhileAModelIsNot() throws Exception {
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).strictReadiness(false)
                .model(model("m", false)).loadModel("m").build();
        backend.readyCheck = () -> java.util.concurrent.CompletableFuture.completedFuture(false);
        assertFalse(host.isModelReady("m"));
        assertTrue(host.isReady(), "--strict-readiness=false: ready while running, whatever the models");
        assertTrue(host.checkReady().get(5, TimeUnit.SECONDS));
    }

    /** announceShutdown (serve --drain-delay-secs): readiness false at once, for good, while requests are still admitted and served. */
    @Test
    void announceShutdown_readinessFalse_requestsStillServed() throws Exception {
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT)
                .model(model("m", false)).loadModel("m").build();
        assertTrue(host.isReady());

        host.announceShutdown();
        host.announceShutdown(); // idempotent

        assertFalse(host.isReady(), "readiness false once the shutdown is announced");
        assertFalse(host.checkReady().get(5, TimeUnit.SECONDS));
        assertTrue(host.isLive(), "still live");
        assertTrue(host.isModelReady("m"), "the model still serves");
        assertEquals(7L, ScriptedBackend.tagOf(host.infer(request("m", 7)).get(5, TimeUnit.SECONDS)), "requests still served");
    }

    @Test
    void cancelWhileQueued_endsAtOnceWithCancelled_modelNeverSeesIt_B6() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch entered = new CountDownLatch(1);
        List<Long> seen = new CopyOnWriteArrayList<>();
        backend.on("m", (batch, inst) -> {
            seen.add(ScriptedBackend.tagOf(ScriptedBackend.echo(batch.getFirst())));
            entered.countDown();
            release.await();
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        start(true);
        Recorder running = new Recorder();
        host.stream(request("m", 1), running);
        assertTrue(entered.await(5, TimeUnit.SECONDS));
        Recorder queued = new Recorder();
        var handle = host.stream(request("m", 2), queued);
        assertTrue(handle.cancel());
        queued.await();
        assertEquals(ErrorCode.CANCELLED, queued.error.get().code());
        release.countDown();
        running.await();
        assertEquals(List.of(1L), seen);
    }

    @Test
    void cancelWhileExecuting_isVisibleToBackend_whichStillEndsIt_B6() throws Exception {
        CountDownLatch entered = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            entered.countDown();
            ScheduledRequest r = batch.getFirst();
            while (!r.isCancelled()) {
                Thread.onSpinWait();
            }
            r.sender().sendError(new BackplaneException(ErrorCode.CANCELLED, "stopped early"));
        });
        start(false);
        CompletableFuture<InferenceResponse> f = host.infer(request("m", 1));
        assertTrue(entered.await(5, TimeUnit.SECONDS));
        f.cancel(true);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (host.openRequests() > 0 && System.nanoTime() < end) {
            Thread.sleep(2);
        }
        assertEquals(0, host.openRequests());
    }

    @Test
    void infer_onDecoupledModel_isRejectedWithAdvice() {
        start(true);
        BackplaneException e = failure(host.infer(request("m", 1)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("generate_stream"), e.getMessage());
    }

    @Test
    void close_stopsAdmission_andLeavesNothingRunning_L10() throws Exception {
        start(false, "other");
        host.close();
        BackplaneException e = failure(host.infer(request("m", 1)));
        assertEquals(ErrorCode.UNAVAILABLE, e.code());
        assertFalse(host.isLive());
    }

    /** Records what a stream observer receives. */
    static final class Recorder implements ResponseObserver {
        final List<InferenceResponse> responses = new CopyOnWriteArrayList<>();
        final AtomicInteger terminals = new AtomicInteger();
        final AtomicReference<BackplaneException> error = new AtomicReference<>();
        final CountDownLatch done = new CountDownLatch(1);

        @Override
        public void onResponse(InferenceResponse response) {
            responses.add(response);
        }

        @Override
        public void onComplete() {
            terminals.incrementAndGet();
            done.countDown();
        }

        @Override
        public void onError(BackplaneException e) {
            error.set(e);
            terminals.incrementAndGet();
            done.countDown();
        }

        void await() throws InterruptedException {
            assertTrue(done.await(10, TimeUnit.SECONDS), "the stream ended");
            Thread.sleep(20); // a second terminal would arrive now
            assertEquals(1, terminals.get(), "exactly one terminal call");
        }
    }
}
