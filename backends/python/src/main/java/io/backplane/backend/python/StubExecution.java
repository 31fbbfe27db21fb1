package io.backplane.backend.python;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.jspecify.annotations.Nullable;

/**
 * One posted batch of a stub generation: its requests, its sequence number in the control block
 * and the state the connection's threads share about it (the worker waiting for its result, the
 * reader and the monitor that may abandon it). A plain holder: the rules live in the classes that
 * touch it, {@link ExecutionTable} (P2, P3), {@link ExecutionMemory} (P4) and {@link HandOff}.
 */
final class StubExecution {
    final long id;
    final List<StubRequest> reqs = new ArrayList<>();
    final long startNanos = System.nanoTime();
    long seq;
    volatile @Nullable Thread waiter;
    volatile boolean resultSeen;
    volatile boolean abandoned;
    /** Counted down once {@link ExecutionTable#failAll} has ended every request of this execution. */
    final CountDownLatch failed = new CountDownLatch(1);
    SharedRegion.@Nullable Block msgBlock;
    /** {@link #msgBlock} is the connection's message scratch block: it goes back to the connection, not to the region. */
    boolean msgInScratch;

    StubExecution(long id) {
        this.id = id;
    }
}
