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
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.MemoryReservation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The host's bounds (O1, O2): the memory budget, the default queue bound, the instance caps. */
@Timeout(60)
class HostLimitsTest {
    private final ScriptedBackend backend = new ScriptedBackend();
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

    private BackplaneHost.Builder builder() {
        return BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5));
    }

    private static ModelConfig withInstances(String name, int count) {
        return model(name, false).toBuilder().instanceGroups(List.of(InstanceGroup.of(name + "_group", count, InstanceKind.CPU, List.of()))).build();
    }

    @Test
    void memoryBudget_overBudget_refusedAtOnce_namesBudget_andCounts() {
        host = builder().memoryBudget(1000).build();
        MemoryReservation a = host.reserveMemory(600, "request A");
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.reserveMemory(600, "request B"));
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("request B") && e.getMessage().contains("600 of the budget's 1000 bytes"), e.getMessage());
        BackplaneException whole = assertThrows(BackplaneException.class, () -> host.reserveMemory(1001, "request C"));
        assertTrue(whole.getMessage().contains("larger than the whole budget"), whole.getMessage());
        assertEquals(new MemoryReservation.Usage(1000, 600, 2), host.memoryUsage());
        a.close();
        a.close(); // idempotent
        try (MemoryReservation b = host.reserveMemory(600, "request B")) {
            assertEquals(600, host.memoryUsage().heldBytes());
            assertThrows(BackplaneException.class, () -> b.grow(401));
            assertEquals(600, b.bytes(), "a refused growth keeps what was held");
            b.grow(400);
            assertEquals(1000, host.memoryUsage().heldBytes());
        }
        assertEquals(0, host.memoryUsage().heldBytes());
    }

    /** Many threads reserve, grow and release at random: the budget is never exceeded and ends at zero. */
    @Test
    void memoryBudget_concurrentReservations_neverOverLimit_endAtZero() throws Exception {
        long limit = 10_000;
        host = builder().memoryBudget(limit).build();
        int threads = 16;
        CountDownLatch gate = new CountDownLatch(1);
        AtomicLong overLimit = new AtomicLong();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            ts.add(Thread.ofPlatform().start(() -> {
                try {
                    gate.await();
                } catch (InterruptedException e) {
                    return;
                }
                ThreadLocalRandom rnd = ThreadLocalRandom.current();
                for (int i = 0; i < 2_000; i++) {
                    try (MemoryReservation r = host.reserveMemory(rnd.nextLong(0, 3_000), "r")) {
                        r.grow(rnd.nextLong(0, 1_000));
                    } catch (BackplaneException refused) {
                        // fine: the budget was full
                    }
                    if (host.memoryUsage().heldBytes() > limit) {
                        overLimit.incrementAndGet();
                    }
                }
            }));
        }
        gate.countDown();
        for (Thread t : ts) {
            t.join();
        }
        assertEquals(0, overLimit.get(), "held bytes seen over the limit");
        assertEquals(0, host.memoryUsage().heldBytes());
    }

    @Test
    void defaultQueueBound_noMaxQueueSize_refusesOverBound_thenServesAgain() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch running = new CountDownLatch(1);
        backend.on("m", (batch, inst) -> {
            running.countDown();
            release.await();
            ScriptedBackend.ECHO.execute(batch, inst);
        });
        host = builder().defaultMaxQueueSize(3).model(model("m", false)).loadModel("m").build();
        List<CompletableFuture<InferenceResponse>> held = new ArrayList<>();
        held.add(host.infer(request("m", 0)));
        assertTrue(running.await(10, TimeUnit.SECONDS));
        for (int i = 1; i <= 3; i++) {
            held.add(host.infer(request("m", i)));
        }
        CompletableFuture<InferenceResponse> over = host.infer(request("m", 99));
        ExecutionException e = assertThrows(ExecutionException.class, () -> over.get(10, TimeUnit.SECONDS));
        BackplaneException b = assertInstanceOf(BackplaneException.class, e.getCause());
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, b.code());
        assertTrue(b.getMessage().contains("model 'm'") && b.getMessage().contains("--default-max-queue-size"), b.getMessage());
        release.countDown();
        for (int i = 0; i < held.size(); i++) {
            assertEquals(i, tagOf(held.get(i).get(10, TimeUnit.SECONDS)));
        }
        assertEquals(7, tagOf(host.infer(request("m", 7)).get(10, TimeUnit.SECONDS)));
    }

    /** Issue 15 item 8: an unload during a long load cancels it instead of waiting it out. */
    @Test
    void unload_duringALongLoad_cancelsIt_andTheModelLoadsAgainLater() throws Exception {
        host = builder().model(withInstances("m", 2)).build();
        backend.creating = new CountDownLatch(1);
        CompletableFuture<Void> load = CompletableFuture.runAsync(() -> host.load("m"));
        assertTrue(backend.creating.await(10, TimeUnit.SECONDS), "the load reached createInstance");
        host.unload("m"); // returns although createInstance would block forever
        ExecutionException e = assertThrows(ExecutionException.class, () -> load.get(10, TimeUnit.SECONDS));
        BackplaneException b = assertInstanceOf(BackplaneException.class, e.getCause());
        assertEquals(ErrorCode.CANCELLED, b.code(), b.getMessage());
        assertTrue(b.getMessage().contains("was cancelled"), b.getMessage());
        assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "what the cancelled load created is closed");
        assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "the cancelled load's model is closed");
        backend.creating = null;
        host.load("m");
        assertEquals(3, tagOf(host.infer(request("m", 3)).get(10, TimeUnit.SECONDS)));
    }

    @Test
    void instanceCap_perModel_loadFailsClearly_noInstanceStarted() {
        host = builder().maxInstancesPerModel(4).model(withInstances("huge", 10_000)).build();
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("huge"));
        assertTrue(e.getMessage().contains("10000 instances") && e.getMessage().contains("limit of 4 per model"), e.getMessage());
        assertEquals(0, backend.instancesCreated.get());
    }

    @Test
    void instanceCap_perHost_countsLoadedModels_andFreesOnUnload() throws Exception {
        host = builder().maxInstancesPerHost(5).model(withInstances("a", 3)).model(withInstances("b", 3)).build();
        host.load("a");
        BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("b"));
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("runs 3 of its limit of 5"), e.getMessage());
        host.unload("a");
        host.load("b");
        assertEquals(1, tagOf(host.infer(request("b", 1)).get(10, TimeUnit.SECONDS)));
    }
}
