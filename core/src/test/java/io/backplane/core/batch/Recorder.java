package io.backplane.core.batch;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.ScheduledRequest;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A model script that records each batch's tags, optionally waits on a gate, then echoes. */
final class Recorder implements ScriptedBackend.Script {
    final LinkedBlockingQueue<List<Long>> batches = new LinkedBlockingQueue<>();
    volatile CountDownLatch gate = new CountDownLatch(0);

    /** From now on every execute waits until {@link #open}. */
    void close() {
        gate = new CountDownLatch(1);
    }

    void open() {
        gate.countDown();
    }

    @Override
    public void execute(List<ScheduledRequest> batch, InstanceContext instance) throws Exception {
        CountDownLatch g = gate; // read before the batch is visible, so a test that closes the gate after seeing it cannot block it
        batches.add(BatchFixture.tags(batch));
        if (!g.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("test gate never opened");
        }
        ScriptedBackend.ECHO.execute(batch, instance);
    }

    List<Long> next() throws InterruptedException {
        List<Long> b = batches.poll(10, TimeUnit.SECONDS);
        assertNotNull(b, "no batch executed within 10 s");
        return b;
    }

    /** Nothing executes for {@code millis} of real time (used with a clock that does not move). */
    void assertQuiet(long millis) throws InterruptedException {
        assertNull(batches.poll(millis, TimeUnit.MILLISECONDS), "a batch executed although nothing should have");
    }
}
