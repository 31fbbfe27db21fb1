package io.backplane.spi.batch;

import io.backplane.spi.Experimental;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Forms batches out of the accepted requests of one model version. Created by
 * {@link BatcherFactory#create}; owned by the core, which closes it exactly once.
 *
 * <p><b>Flow.</b> Callers' threads {@link #enqueue} requests. Each instance of the model has one
 * worker thread that loops on {@link #nextBatch}: a batch is formed when an instance is free to
 * take it, so requests that arrive meanwhile join it.
 *
 * <p><b>Containment.</b> The core checks every batch a batcher returns: an empty batch, too many
 * items, a request twice, a request of another model or one already ended is dropped or
 * answered with an error, and the worker goes on. A batcher that throws from {@link #nextBatch}
 * costs nothing but a log line; one that throws from {@link #enqueue} fails only that request.
 *
 * <p>Implementations must be thread-safe.
 */
@Experimental
public interface Batcher extends AutoCloseable {
    /**
     * Queues an accepted request. Called on the caller's thread.
     *
     * @throws BackplaneException to reject the request at once, e.g. RESOURCE_EXHAUSTED when the
     *     queue is full; the core answers the request with it
     */
    void enqueue(ScheduledRequest request);

    /**
     * Blocks until a batch is ready for a free instance, or {@code timeout} passes (returns an
     * empty list), or the batcher is closed (returns an empty list). Called by instance worker
     * threads, concurrently when the model has several instances.
     *
     * @param maxBatchSize the largest batch (along the batch dimension) the caller takes
     */
    List<ScheduledRequest> nextBatch(int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException;

    /**
     * As {@link #nextBatch(int, long, TimeUnit)}, for the worker of instance {@code instance}
     * (0 ≤ instance &lt; {@link BatcherContext#instanceCount()}). The core calls this one; a batcher
     * that binds work to instances (the sequence batcher: a sequence's slot belongs to one
     * instance) overrides it. The default ignores the index. Since SPI 2.
     *
     * @param instance the index of the instance whose worker asks, fixed for the worker's life
     */
    default List<ScheduledRequest> nextBatch(int instance, int maxBatchSize, long timeout, TimeUnit unit) throws InterruptedException {
        return nextBatch(maxBatchSize, timeout, unit);
    }

    /**
     * A request this batcher handed out asked to run again ({@link ScheduledRequest#reschedule});
     * its execute has returned and it is queued again. The default treats it as a new request
     * ({@link #enqueue}); the sequence batcher puts it back at the head of its sequence. Called on
     * the instance's worker thread before it asks for its next batch. Since SPI 2.
     *
     * @throws io.backplane.spi.BackplaneException to end the request with that error instead
     */
    default void rescheduled(ScheduledRequest request) {
        enqueue(request);
    }

    /**
     * Instance {@code instance} failed (its execute threw a failure report, its process died, or
     * its watchdog fired); the core restarts it. A batcher that keeps per-instance state (the
     * sequence batcher's slots) ends it here, so no state silently survives into the new
     * incarnation. Called on any thread, possibly more than once per failure. The default does
     * nothing. Since SPI 2.
     */
    default void instanceFailed(int instance) {
    }

    /**
     * How many sequence slots hold a sequence now (hygiene checks and statistics); 0 for batchers
     * without sequences, the default. Since SPI 2.
     */
    default int sequenceSlotsInUse() {
        return 0;
    }

    /**
     * A request in the queue was cancelled or ended by the core; the batcher should drop it.
     * Optional: the core ignores ended requests that still come back in a batch.
     */
    default void cancelled(ScheduledRequest request) {
    }

    /** Removes and returns every queued request (unload). */
    List<ScheduledRequest> drain();

    /** How many requests are queued now. */
    int queued();

    /**
     * Wakes every waiting {@link #nextBatch} caller; later calls return empty at once. Called
     * once by the core, after {@link #drain}. The default does nothing: a batcher whose
     * {@link #nextBatch} never blocks past its timeout needs no close.
     */
    @Override
    default void close() {
    }
}
