package io.backplane.core.batch;

import static io.backplane.core.batch.BatchFixture.dynamic;
import static io.backplane.core.batch.BatchFixture.model;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.batch.BatchFixture.FakeTicker;
import io.backplane.core.testing.Hygiene;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.batch.Batcher;
import io.backplane.spi.batch.BatcherContext;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.TimeoutAction;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The dynamic batcher alone, against a hand-written {@link BatcherContext}: what the host cannot provoke. */
@Timeout(30)
class DynamicBatcherUnitTest {
    private final FakeTicker clock = new FakeTicker();
    private final Map<Long, BackplaneException> rejected = new ConcurrentHashMap<>();

    private Batcher batcher(DynamicBatching db) {
        ModelConfig config = model("m", 8, db, 1).build();
        return new DynamicBatcherFactory().create(BatchFixture.context(config, clock, (r, e) -> rejected.put(r.id(), e)));
    }

    private FakeRequest req(long id, int batch) {
        return new FakeRequest(id, BatchFixture.request("m", id, batch, 0, 0), batch, 1, clock.nanoTime());
    }

    /** Scenario 27, inside the batcher: a request bigger than the worker's maximum is rejected, never queued forever. */
    @Test
    void requestBiggerThanWorkerMax_rejectedNotStuck() throws Exception {
        try (Batcher b = batcher(dynamic(0))) {
            b.enqueue(req(1, 4));
            b.enqueue(req(2, 1));
            assertEquals(List.of(2L), b.nextBatch(2, 1, TimeUnit.SECONDS).stream().map(ScheduledRequest::id).toList());
            assertEquals(ErrorCode.INVALID_ARGUMENT, rejected.get(1L).code());
            assertEquals(0, b.queued());
        }
    }

    /** Scenario 29: close wakes a waiting worker at once, and later calls return empty; enqueue after close is refused. */
    @Test
    void close_wakesWaitingWorker_andRefusesNewRequests() throws Exception {
        Batcher b = batcher(dynamic(1_000_000_000L));
        b.enqueue(req(1, 1)); // waits for a very long delay
        Thread worker = Thread.ofPlatform().start(() -> {
            try {
                assertEquals(List.of(), b.nextBatch(8, 1, TimeUnit.HOURS));
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        Thread.sleep(50);
        b.close();
        worker.join(Duration.ofSeconds(5));
        assertTrue(!worker.isAlive(), "close woke the worker");
        assertEquals(List.of(), b.nextBatch(8, 1, TimeUnit.HOURS));
        assertEquals(ErrorCode.UNAVAILABLE, assertThrows(BackplaneException.class, () -> b.enqueue(req(2, 1))).code());
        assertEquals(1, b.drain().size());
    }

    /** The timer thread starts with the first deadline, rejects on time, and is gone after close (scenario 29). */
    @Test
    void timerThread_rejectsOnTime_andStopsOnClose() throws Exception {
        Batcher b = batcher(BatchFixture.dynamic(List.of(), 0, false, 0, 0, BatchFixture.policy(TimeoutAction.REJECT, 1000, false, 0), Map.of()));
        b.enqueue(req(1, 1));
        assertTrue(Hygiene.backplaneThreads().stream().anyMatch(n -> n.startsWith("backplane-batcher-m")), Hygiene.backplaneThreads().toString());
        clock.advance(Duration.ofMillis(2));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!rejected.containsKey(1L) && System.nanoTime() < end) {
            Thread.sleep(2);
        }
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, rejected.get(1L).code());
        assertEquals(0, b.queued());
        b.close();
        Hygiene.assertNoBackplaneThreads();
    }

    /** Drain returns every queued request, in priority order, delayed ones included; the queue is empty afterwards. */
    @Test
    void drain_returnsEverything() {
        QueuePolicy delay = BatchFixture.policy(TimeoutAction.DELAY, 1000, false, 0);
        try (Batcher b = batcher(BatchFixture.dynamic(List.of(), 1_000_000_000L, false, 2, 2, delay, Map.of()))) {
            b.enqueue(new FakeRequest(1, BatchFixture.request("m", 1), 1, 2, clock.nanoTime()));
            clock.advance(Duration.ofMillis(5));
            b.enqueue(new FakeRequest(2, BatchFixture.request("m", 2), 1, 1, clock.nanoTime()));
            assertEquals(2, b.queued());
            assertEquals(List.of(2L, 1L), b.drain().stream().map(ScheduledRequest::id).toList());
            assertEquals(0, b.queued());
        }
    }
}
