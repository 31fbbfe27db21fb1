package io.backplane.core.batch;

import static io.backplane.core.batch.BatchFixture.dynamic;
import static io.backplane.core.batch.BatchFixture.failure;
import static io.backplane.core.batch.BatchFixture.model;
import static io.backplane.core.batch.BatchFixture.request;
import static io.backplane.core.batch.BatchFixture.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.batch.BatcherFactory;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Batcher SPI from a third party's side (a batcher registered in code and selected by the
 * model parameter {@code batcher}), and B8: a batcher that misbehaves costs only the requests it
 * mishandles — each gets an error or still runs once — and the worker goes on.
 */
@Timeout(60)
class BatcherContainmentTest {
    private final ScriptedBackend backend = new ScriptedBackend();
    private final Rogue rogue = new Rogue();
    private BackplaneHost host;

    enum Mode { FIFO, THROW_ONCE, EMPTY_AND_NULL, TOO_MANY, TWICE, FOREIGN, ENQUEUE_THROWS }

    /** A simple FIFO batcher that misbehaves in the way {@link #mode} says. */
    static final class Rogue implements BatcherFactory {
        volatile Mode mode = Mode.FIFO;
        final AtomicInteger created = new AtomicInteger();
        final AtomicInteger misbehaved = new AtomicInteger();
        final Map<String, LinkedBlockingDeque<ScheduledRequest>> queues = new ConcurrentHashMap<>();

        @Override
        public String name() {
            return "rogue";
        }

        @Override
        public Batcher create(BatcherContext context) {
            created.incrementAndGet();
            String model = context.config().name();
            LinkedBlockingDeque<ScheduledRequest> q = new LinkedBlockingDeque<>();
            queues.put(model, q);
            return new Batcher() {
                private volatile boolean closed;

                @Override
                public void enqueue(ScheduledRequest r) {
                    if (mode == Mode.ENQUEUE_THROWS && tagOf(r) == 13) {
                        throw new IllegalStateException("rogue enqueue");
                    }
                    if (mode == Mode.ENQUEUE_THROWS && tagOf(r) == 14) {
                        throw new BackplaneException(ErrorCode.RESOURCE_EXHAUSTED, "rogue is full");
                    }
                    q.add(r);
                }

                @Override
                public List<ScheduledRequest> nextBatch(int max, long timeout, TimeUnit unit) throws InterruptedException {
                    if (closed) {
                        return List.of();
                    }
                    ScheduledRequest first = q.poll(timeout, unit);
                    if (first == null) {
                        return List.of();
                    }
                    switch (mode) {
                        case THROW_ONCE -> {
                            if (misbehaved.getAndIncrement() == 0) {
                                q.addFirst(first);
                                throw new IllegalStateException("rogue nextBatch");
                            }
                        }
                        case EMPTY_AND_NULL -> {
                            int n = misbehaved.getAndIncrement();
                            if (n < 2) {
                                q.addFirst(first);
                                return n == 0 ? List.of() : null;
                            }
                        }
                        case TOO_MANY -> {
                            List<ScheduledRequest> all = new ArrayList<>(List.of(first));
                            q.drainTo(all);
                            return all;
                        }
                        case TWICE -> {
                            return java.util.Arrays.asList(first, first);
                        }
                        case FOREIGN -> {
                            LinkedBlockingDeque<ScheduledRequest> other = queues.get("b");
                            ScheduledRequest stolen = other == null ? null : other.poll();
                            if (stolen != null) {
                                misbehaved.incrementAndGet();
                                return List.of(stolen, first);
                            }
                        }
                        default -> {
                        }
                    }
                    List<ScheduledRequest> out = new ArrayList<>(List.of(first));
                    while (out.size() < max && q.peek() != null) {
                        out.add(q.poll());
                    }
                    return out;
                }

                @Override
                public void cancelled(ScheduledRequest r) {
                    q.remove(r);
                }

                @Override
                public List<ScheduledRequest> drain() {
                    List<ScheduledRequest> out = new ArrayList<>();
                    q.drainTo(out);
                    return out;
                }

                @Override
                public int queued() {
                    return q.size();
                }

                @Override
                public void close() {
                    closed = true;
                }
            };
        }
    }

    private static ModelConfig rogueModel(String name, int max) {
        return model(name, max, dynamic(0), 1).parameter("batcher", "rogue").build();
    }

    private BackplaneHost start(Recorder recorder, ModelConfig... configs) {
        BackplaneHost.Builder b = BatchFixture.host(backend).batcher(rogue);
        for (ModelConfig c : configs) {
            backend.on(c.name(), recorder);
            b.model(c).loadModel(c.name());
        }
        host = b.build();
        return host;
    }

    @AfterEach
    void close() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests());
        }
        Hygiene.assertNoBackplaneThreads();
    }

    /** The default batchers are discoverable through ServiceLoader like any plugin's. */
    @Test
    void serviceLoader_findsDynamicAndNone() {
        List<String> names = ServiceLoader.load(BatcherFactory.class).stream().map(p -> p.get().name()).sorted().toList();
        assertTrue(names.containsAll(List.of("dynamic", "none")), names.toString());
    }

    /** A third-party batcher selected by the model parameter {@code batcher} forms the batches. */
    @Test
    void thirdPartyBatcher_selectedByParameter_servesRequests() throws Exception {
        Recorder recorder = new Recorder();
        start(recorder, rogueModel("m", 4));
        assertEquals(1, rogue.created.get());
        for (long t = 1; t <= 20; t++) {
            assertEquals(t, tagOf(host.infer(request("m", t)).get(5, TimeUnit.SECONDS)));
        }
        assertEquals(List.of(1L), recorder.next());
    }

    /** Scenario 16 / B8: a batcher that throws from nextBatch costs a log line; the request still runs. */
    @Test
    void nextBatchThrows_workerGoesOn() throws Exception {
        rogue.mode = Mode.THROW_ONCE;
        start(new Recorder(), rogueModel("m", 4));
        assertEquals(1, tagOf(host.infer(request("m", 1)).get(5, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(host.infer(request("m", 2)).get(5, TimeUnit.SECONDS)));
        assertTrue(rogue.misbehaved.get() >= 1);
    }

    /** B8: an empty batch and a null batch are ignored; the request still runs once. */
    @Test
    void emptyAndNullBatches_ignored() throws Exception {
        rogue.mode = Mode.EMPTY_AND_NULL;
        Recorder recorder = new Recorder();
        start(recorder, rogueModel("m", 4));
        assertEquals(1, tagOf(host.infer(request("m", 1)).get(5, TimeUnit.SECONDS)));
        assertEquals(List.of(1L), recorder.next());
        recorder.assertQuiet(50);
    }

    /** Scenario 13 / B2 / B8: a batch over max_batch_size: the requests past the limit get an error; the rest run. */
    @Test
    void tooManyRequests_thoseOverMaxGetErrors() throws Exception {
        Recorder recorder = new Recorder();
        start(recorder, rogueModel("m", 2));
        recorder.close();
        CompletableFuture<InferenceResponse> first = host.infer(request("m", 0));
        assertEquals(List.of(0L), recorder.next());
        rogue.mode = Mode.TOO_MANY;
        List<CompletableFuture<InferenceResponse>> f = new ArrayList<>();
        for (long t = 1; t <= 5; t++) {
            f.add(host.infer(request("m", t)));
        }
        recorder.open();
        assertEquals(0, tagOf(first.get(5, TimeUnit.SECONDS)));
        assertEquals(List.of(1L, 2L), recorder.next());
        assertEquals(1, tagOf(f.get(0).get(5, TimeUnit.SECONDS)));
        assertEquals(2, tagOf(f.get(1).get(5, TimeUnit.SECONDS)));
        for (int i = 2; i < 5; i++) {
            BackplaneException e = failure(f.get(i));
            assertEquals(ErrorCode.INTERNAL, e.code());
            assertTrue(e.getMessage().contains("over max_batch_size 2"), e.getMessage());
        }
    }

    /** B1 / B8: a request returned twice (in one batch, and again later) executes once and is answered once. */
    @Test
    void sameRequestTwice_runsOnce() throws Exception {
        rogue.mode = Mode.TWICE;
        Recorder recorder = new Recorder();
        start(recorder, rogueModel("m", 4));
        for (long t = 1; t <= 5; t++) {
            assertEquals(t, tagOf(host.infer(request("m", t)).get(5, TimeUnit.SECONDS)));
            assertEquals(List.of(t), recorder.next());
        }
        assertEquals(0, host.duplicateReleases());
    }

    /** B8: a request of another model in a batch is not executed there; it ends with an error instead of waiting forever. */
    @Test
    void foreignRequest_endsWithError_ownRequestRuns() throws Exception {
        Recorder recorder = new Recorder();
        start(recorder, rogueModel("a", 4), rogueModel("b", 4));
        Recorder bRecorder = new Recorder();
        bRecorder.close(); // b's worker is parked in execute with b's first request so that its queue keeps the next one
        backend.on("b", bRecorder);
        CompletableFuture<InferenceResponse> bFirst = host.infer(request("b", 100));
        assertEquals(List.of(100L), bRecorder.next());
        CompletableFuture<InferenceResponse> stolen = host.infer(request("b", 101));
        rogue.mode = Mode.FOREIGN;
        CompletableFuture<InferenceResponse> own = host.infer(request("a", 1));
        assertEquals(1, tagOf(own.get(5, TimeUnit.SECONDS)));
        BackplaneException e = failure(stolen);
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("batcher of model 'a'"), e.getMessage());
        bRecorder.open();
        assertEquals(100, tagOf(bFirst.get(5, TimeUnit.SECONDS)));
        rogue.mode = Mode.FIFO;
        assertEquals(102, tagOf(host.infer(request("b", 102)).get(5, TimeUnit.SECONDS)));
    }

    /** Scenario 16: a batcher that throws from enqueue fails only that request (its own error code kept when it gives one). */
    @Test
    void enqueueThrows_onlyThatRequestFails() throws Exception {
        rogue.mode = Mode.ENQUEUE_THROWS;
        start(new Recorder(), rogueModel("m", 4));
        BackplaneException e = failure(host.infer(request("m", 13)));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("rogue enqueue"), e.getMessage());
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, failure(host.infer(request("m", 14))).code());
        assertEquals(15, tagOf(host.infer(request("m", 15)).get(5, TimeUnit.SECONDS)));
    }
}
