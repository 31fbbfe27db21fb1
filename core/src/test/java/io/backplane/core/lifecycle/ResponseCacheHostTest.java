package io.backplane.core.lifecycle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ModelStatistics;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code response_cache} through the embedded host: hits skip the backend, statistics count them, exclusions hold. */
@Timeout(60)
class ResponseCacheHostTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();
    private final AtomicInteger executed = new AtomicInteger();
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private void model(String name, String extra) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "%s"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
                %s
                """.formatted(name, extra));
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve("weights"), "v1");
        // Doubles IN and reuses one output buffer per instance: the cache must have copied it.
        float[] reused = new float[2];
        backend.on(name, (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                executed.incrementAndGet();
                float[] in = r.request().input("IN").toFloatArray();
                reused[0] = in[0] * 2;
                reused[1] = in[1] * 2;
                r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofFloats("OUT", new long[] {2}, reused))));
            }
        });
    }

    private BackplaneHost start(long cacheBytes) {
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.NONE).responseCache(cacheBytes)
                .build();
        return host;
    }

    private static float[] infer(BackplaneHost h, String model, float a, float b) throws Exception {
        return h.infer(InferenceRequest.builder(model).input(Tensor.ofFloats("IN", new long[] {2}, a, b)).build()).get(10, TimeUnit.SECONDS)
                .output("OUT").toFloatArray();
    }

    @Test
    void cachedModel_repeatedRequestIsAnsweredWithoutExecuting_andCountedAsAHit() throws Exception {
        model("c", "response_cache { enable: true }");
        BackplaneHost h = start(1 << 20);

        assertArrayEquals(new float[] {2, 4}, infer(h, "c", 1, 2));
        assertArrayEquals(new float[] {6, 8}, infer(h, "c", 3, 4));
        assertArrayEquals(new float[] {2, 4}, infer(h, "c", 1, 2));
        assertArrayEquals(new float[] {2, 4}, infer(h, "c", 1, 2));

        assertEquals(2, executed.get(), "two distinct requests executed, the repeats were hits");
        ModelStatistics s = h.statistics("c", 1).getFirst();
        assertEquals(2, s.cacheHit().count());
        assertEquals(2, s.cacheMiss().count());
        assertEquals(4, s.success().count(), "hits are successful requests");
        assertEquals(2, s.executionCount(), "hits do not execute");
    }

    /**
     * Many clients, few distinct inputs, a cache that holds only some of them: every answer is its
     * own input doubled (no hit hands out another request's or a reused buffer's data), every
     * request is a hit or a miss, and nothing is left open.
     */
    @Test
    void concurrentClients_smallCache_everyAnswerMatchesItsOwnRequest() throws Exception {
        model("c", "response_cache { enable: true }");
        BackplaneHost h = start(6 * (8 + 64)); // room for 6 of the 20 distinct responses
        int threads = 8;
        int perThread = 100;
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        List<Throwable> errors = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
        List<Thread> all = new java.util.ArrayList<>();
        for (int t = 0; t < threads; t++) {
            all.add(Thread.ofPlatform().start(() -> {
                try {
                    go.await();
                    for (int i = 0; i < perThread; i++) {
                        float v = java.util.concurrent.ThreadLocalRandom.current().nextInt(20);
                        assertArrayEquals(new float[] {2 * v, 2 * v + 2}, infer(h, "c", v, v + 1));
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        go.countDown();
        for (Thread t : all) {
            t.join();
        }
        assertEquals(List.of(), errors);
        ModelStatistics s = h.statistics("c", 1).getFirst();
        assertEquals(threads * perThread, s.success().count());
        assertEquals(threads * perThread, s.cacheHit().count() + s.cacheMiss().count());
        assertEquals(s.cacheMiss().count(), executed.get(), "every miss executed once, no hit did");
        assertEquals(0, h.openRequests());
    }

    /** A reload may bring new weights under the same version: the first answer must not outlive it. */
    @Test
    void reloadedVersion_sameRequest_isAnsweredByTheNewLoadNotTheCache() throws Exception {
        Path dir = Files.createDirectories(repo.resolve("r"));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "r"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
                response_cache { enable: true }
                """);
        Files.createDirectories(dir.resolve("1"));
        // What the model computes depends on which load it is (as new weights would): ×2 first, ×3 after the reload.
        backend.on("r", (batch, inst) -> {
            float factor = 1 + backend.modelsLoaded.get();
            for (ScheduledRequest r : batch) {
                executed.incrementAndGet();
                float[] in = r.request().input("IN").toFloatArray();
                r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofFloats("OUT", new long[] {2}, in[0] * factor, in[1] * factor))));
            }
        });
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).responseCache(1 << 20)
                .build();
        host.load("r");
        assertArrayEquals(new float[] {2, 4}, infer(host, "r", 1, 2));
        assertArrayEquals(new float[] {2, 4}, infer(host, "r", 1, 2));
        assertEquals(1, executed.get());

        host.unload("r");
        host.load("r");

        assertArrayEquals(new float[] {3, 6}, infer(host, "r", 1, 2), "the reloaded version answers, not the cache of the old one");
        assertEquals(2, executed.get());
    }

    @Test
    void cacheExclusions_modelWithoutTheField_requestWithACorrelationId_hostWithoutACache() throws Exception {
        model("plain", "");
        model("c", "response_cache { enable: true }");
        BackplaneHost h = start(1 << 20);

        infer(h, "plain", 1, 2);
        infer(h, "plain", 1, 2);
        assertEquals(2, executed.get(), "a model without response_cache never uses the cache");
        assertEquals(0, h.statistics("plain", 1).getFirst().cacheMiss().count());

        for (int i = 0; i < 2; i++) {
            h.infer(InferenceRequest.builder("c").input(Tensor.ofFloats("IN", new long[] {2}, 1, 2)).correlationId("seq-1").build())
                    .get(10, TimeUnit.SECONDS);
        }
        assertEquals(4, executed.get(), "a request of a sequence is never answered from the cache");
        h.close();
        host = null;

        executed.set(0);
        BackplaneHost noCache = start(0);
        infer(noCache, "c", 1, 2);
        infer(noCache, "c", 1, 2);
        assertEquals(2, executed.get(), "without --cache-config the field has no effect");
        assertEquals(0, noCache.statistics("c", 1).getFirst().cacheHit().count());
    }
}
