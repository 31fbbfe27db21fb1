package io.backplane.testkit;

import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * Holds every batch at the door of the backend's {@code execute} until the test opens it, so the
 * test can cancel, unload or close while a request is known to be executing — without timing.
 */
final class Gate {
    private final CountDownLatch open = new CountDownLatch(1);
    final BlockingQueue<List<Long>> arrived = new LinkedBlockingQueue<>();

    /** Called by the probe on the core's worker thread, before the backend's execute. */
    void pass(List<Long> requestIds) throws InterruptedException {
        arrived.add(requestIds);
        open.await();
    }

    void open() {
        open.countDown();
    }
}
