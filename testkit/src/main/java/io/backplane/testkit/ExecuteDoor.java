package io.backplane.testkit;

import io.backplane.spi.ScheduledRequest;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Holds every batch at the door of the backend's {@code execute}, on the core's worker thread,
 * until the test {@linkplain #open() opens} it: a handshake that tells the test a request is
 * dispatched to an instance and not yet executing, so it can cancel it, answer it, unload or close
 * — without timing. Get one from {@link ModelHarness#holdExecute()}; closing it opens it.
 */
public final class ExecuteDoor implements AutoCloseable {
    private final CountDownLatch open = new CountDownLatch(1);
    private final BlockingQueue<List<ScheduledRequest>> arrived = new LinkedBlockingQueue<>();
    private final Duration timeout;

    ExecuteDoor(Duration timeout) {
        this.timeout = timeout;
    }

    /**
     * Waits for the next batch to reach the door and returns its requests as the backend will get
     * them (the core's own objects: {@code sender()} answers the client, {@code isCancelled()} is
     * live).
     *
     * @throws AssertionError when no batch arrives within the harness's answer timeout
     */
    public List<ScheduledRequest> awaitBatch() throws InterruptedException {
        List<ScheduledRequest> b = arrived.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
        if (b == null) {
            throw new AssertionError("no batch reached the backend's execute within " + timeout.toMillis() + " ms");
        }
        return b;
    }

    /** Lets the held batches, and every later one, into {@code execute}. Idempotent. */
    public void open() {
        open.countDown();
    }

    @Override
    public void close() {
        open();
    }

    /** Called by the harness on the worker thread before the backend's execute. */
    void pass(List<ScheduledRequest> batch) throws InterruptedException {
        arrived.add(List.copyOf(batch));
        open.await();
    }
}
