package io.backplane.plugin.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.TestSupport;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code nv_inference_pending_request_count} counts what Triton counts: requests waiting to execute,
 * not the executing ones (issue 34: it read 0 while three were in flight, two of them queued). A
 * held instance shows the queued requests alone; a cancelled queued request leaves the count at
 * once; after 8 threads sent 320 requests with random cancellations and random timing, the count
 * is back to 0 and counts a new queue exactly (a request counted out twice would leave it short);
 * so it does after decoupled requests that were rescheduled (dispatched twice, counted out once).
 */
@Timeout(120)
class PendingCountTest {
    /**
     * One instance; every execute takes a permit of {@link #gate} first, so the test holds and frees
     * the instance. In a decoupled model, a request whose IN0 is 1 is rescheduled once (it waits in
     * the queue again, then ends).
     */
    static final class HeldBackend implements BackendFactory {
        final Semaphore gate = new Semaphore(0);
        final Semaphore entered = new Semaphore(0);
        final java.util.Set<ScheduledRequest> rescheduled = java.util.concurrent.ConcurrentHashMap.newKeySet();

        @Override
        public String name() {
            return "held";
        }

        @Override
        public Backend create(BackendContext context) {
            return new Backend() {
                @Override
                public Model loadModel(ModelContext ctx) {
                    return new Model() {
                        @Override
                        public ModelInstance createInstance(InstanceContext ictx) {
                            return new ModelInstance() {
                                @Override
                                public void execute(List<ScheduledRequest> batch) throws Exception {
                                    entered.release();
                                    if (!gate.tryAcquire(60, TimeUnit.SECONDS)) {
                                        throw new IllegalStateException("the test never opened the gate");
                                    }
                                    for (ScheduledRequest r : batch) {
                                        if (ctx.config().decoupled() && r.request().input("IN0").toFloatArray()[0] == 1f && rescheduled.add(r)) {
                                            r.reschedule();
                                            continue;
                                        }
                                        r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN0").withName("OUT0"))));
                                    }
                                }

                                @Override
                                public void close() {
                                }
                            };
                        }

                        @Override
                        public void close() {
                        }
                    };
                }

                @Override
                public void close() {
                }
            };
        }
    }

    private static InferenceRequest request() {
        return request("held", 1f);
    }

    private static InferenceRequest request(String model, float value) {
        return InferenceRequest.builder(model).input(Tensor.ofFloats("IN0", new long[] {1, 1}, value)).build();
    }

    /** A decoupled model's request as a stream; completes with its last response once the stream completes. */
    private static CompletableFuture<InferenceResponse> stream(BackplaneHost host, InferenceRequest request) {
        CompletableFuture<InferenceResponse> done = new CompletableFuture<>();
        host.stream(request, new io.backplane.spi.host.ResponseObserver() {
            private volatile InferenceResponse last;

            @Override
            public void onResponse(InferenceResponse response) {
                last = response;
            }

            @Override
            public void onComplete() {
                done.complete(last);
            }

            @Override
            public void onError(io.backplane.spi.BackplaneException error) {
                done.completeExceptionally(error);
            }
        });
        return done;
    }

    private static double pending(String text) {
        return pending(text, "held");
    }

    private static double pending(String text, String model) {
        return MetricsFrontendTest.sample(text, "nv_inference_pending_request_count", "model=\"" + model + "\"", "version=\"1\"");
    }

    private static double inflight(String text) {
        return inflight(text, "held");
    }

    private static double inflight(String text, String model) {
        return MetricsFrontendTest.sample(text, "backplane_inference_inflight_requests", "model=\"" + model + "\"", "version=\"1\"");
    }

    /** Scrapes until pending and in-flight read the expected values or 30 s pass; returns the last scrape. */
    private static String await(MetricsFrontend metrics, double pending, double inflight) throws InterruptedException {
        return await(metrics, "held", pending, inflight);
    }

    private static String await(MetricsFrontend metrics, String model, double pending, double inflight) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        String text = metrics.scrape();
        while ((pending(text, model) != pending || inflight(text, model) != inflight) && System.nanoTime() < deadline) {
            Thread.sleep(10);
            text = metrics.scrape();
        }
        return text;
    }

    @Test
    void pending_countsQueuedNotExecuting_cancelLeavesAtOnce_backToExactAfterARandomStorm() throws Exception {
        HeldBackend held = new HeldBackend();
        ModelConfig config = ModelConfig.builder("held").backend("held").maxBatchSize(1)
                .input(TensorConfig.of("IN0", DataType.FP32, 1)).output(TensorConfig.of("OUT0", DataType.FP32, 1))
                .dynamicBatching(DynamicBatching.builder().build()).build();
        ModelConfig looped = ModelConfig.builder("looped").backend("held").maxBatchSize(1).decoupled(true)
                .input(TensorConfig.of("IN0", DataType.FP32, 1)).output(TensorConfig.of("OUT0", DataType.FP32, 1))
                .dynamicBatching(DynamicBatching.builder().build()).build();
        try (BackplaneHost host = BackplaneHost.builder().backend(held).modelControlMode(ModelControlMode.EXPLICIT).model(config).model(looped)
                .loadModel("held").loadModel("looped").build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0")))) {
            metrics.start();
            // a held instance: one executing, three waiting
            CompletableFuture<InferenceResponse> running = host.infer(request());
            assertTrue(held.entered.tryAcquire(30, TimeUnit.SECONDS), "the first request reaches the instance");
            List<CompletableFuture<InferenceResponse>> queued = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                queued.add(host.infer(request()));
            }
            String text = await(metrics, 3, 4);
            assertEquals(3.0, pending(text), text);
            assertEquals(4.0, inflight(text), text);
            queued.getFirst().cancel(true);
            text = await(metrics, 2, 3);
            assertEquals(2.0, pending(text), "a request cancelled while queued leaves the count: " + text);
            held.gate.release(1_000_000);
            running.get(30, TimeUnit.SECONDS);
            for (CompletableFuture<InferenceResponse> f : queued.subList(1, 3)) {
                f.get(30, TimeUnit.SECONDS);
            }
            text = await(metrics, 0, 0);
            assertEquals(0.0, pending(text), text);

            // 8 threads, random cancellations at random moments while the instance runs freely
            ExecutorService pool = Executors.newFixedThreadPool(8);
            List<CompletableFuture<InferenceResponse>> all = java.util.Collections.synchronizedList(new ArrayList<>());
            CountDownLatch sent = new CountDownLatch(8);
            for (int t = 0; t < 8; t++) {
                pool.execute(() -> {
                    ThreadLocalRandom random = ThreadLocalRandom.current();
                    for (int i = 0; i < 40; i++) {
                        CompletableFuture<InferenceResponse> f = host.infer(request());
                        all.add(f);
                        LockSupport.parkNanos(random.nextLong(50_000));
                        if (random.nextInt(3) == 0) {
                            f.cancel(true);
                        }
                    }
                    sent.countDown();
                });
            }
            assertTrue(sent.await(60, TimeUnit.SECONDS), "the senders finished");
            pool.shutdown();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
            for (CompletableFuture<InferenceResponse> f : all) {
                try {
                    f.get(30, TimeUnit.SECONDS);
                } catch (java.util.concurrent.CancellationException | java.util.concurrent.ExecutionException e) {
                    // cancelled: it ended either way
                }
            }
            text = await(metrics, 0, 0);
            assertEquals(0.0, pending(text), "every request left the queue exactly once: " + text);
            assertEquals(0.0, inflight(text), text);

            // the count is exact afterwards: an over-count would show here, an under-count would read short
            held.gate.drainPermits();
            held.entered.drainPermits();
            CompletableFuture<InferenceResponse> again = host.infer(request());
            assertTrue(held.entered.tryAcquire(30, TimeUnit.SECONDS), "a request reaches the instance");
            List<CompletableFuture<InferenceResponse>> two = List.of(host.infer(request()), host.infer(request()));
            text = await(metrics, 2, 3);
            assertEquals(2.0, pending(text), text);
            held.gate.release(1_000_000);
            again.get(30, TimeUnit.SECONDS);
            for (CompletableFuture<InferenceResponse> f : two) {
                f.get(30, TimeUnit.SECONDS);
            }

            // rescheduled requests (decoupled RESCHEDULE) wait in the queue again but left it once: the count stays exact
            List<CompletableFuture<InferenceResponse>> loops = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                loops.add(stream(host, request("looped", 1f)));
            }
            for (CompletableFuture<InferenceResponse> f : loops) {
                f.get(30, TimeUnit.SECONDS);
            }
            assertEquals(6, held.rescheduled.size(), "each request was rescheduled once");
            text = await(metrics, "looped", 0, 0);
            assertEquals(0.0, pending(text, "looped"), text);
            held.gate.drainPermits();
            held.entered.drainPermits();
            CompletableFuture<InferenceResponse> busy = stream(host, request("looped", 0f));
            assertTrue(held.entered.tryAcquire(30, TimeUnit.SECONDS), "a request reaches the instance");
            List<CompletableFuture<InferenceResponse>> waiting = List.of(stream(host, request("looped", 0f)), stream(host, request("looped", 0f)));
            text = await(metrics, "looped", 2, 3);
            assertEquals(2.0, pending(text, "looped"), "a reschedule counted out twice would read short: " + text);
            held.gate.release(1_000_000);
            busy.get(30, TimeUnit.SECONDS);
            for (CompletableFuture<InferenceResponse> f : waiting) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
        TestSupport.assertNoBackplaneThreads();
    }
}
