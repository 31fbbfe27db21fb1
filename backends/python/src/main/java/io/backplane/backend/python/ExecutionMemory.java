package io.backplane.backend.python;

import java.lang.foreign.ValueLayout;
import org.jspecify.annotations.Nullable;

/**
 * The host blocks of one stub generation's executions: the reusable message scratch block, each
 * request's input and cancel blocks, and the cancel flags mirrored into them.
 *
 * <p>Owns <b>P4</b>: a request's blocks are freed once, and only when the stub is done with it and
 * its execution's result was read ({@link #releaseIfDone}); the message scratch goes back to the
 * connection only when its execution's result was read ({@link #messageDone}), so an abandoned
 * execution keeps it quarantined and later messages are allocated instead. Callers hold the
 * region's read lock (the region is closed only under its write lock, once the process is dead).
 */
final class ExecutionMemory {
    /** Size of the reusable block that carries an execution message of a few requests (no allocation per request). */
    static final int MSG_SCRATCH_BYTES = 4096;

    /**
     * The message scratch block while no execution holds it. Taken by {@link #placeMessage} for a
     * message that fits, given back when that execution's result has been read ({@link #messageDone}).
     */
    private volatile SharedRegion.@Nullable Block msgScratch;
    private boolean msgScratchMade;

    /**
     * Gives {@code e} a block for its message of {@code size} bytes: the scratch block when it is
     * free and large enough, else a fresh one (execute's thread only). Throws when the region is full.
     */
    void placeMessage(SharedRegion reg, StubExecution e, long size) {
        if (!msgScratchMade) {
            msgScratchMade = true;
            msgScratch = reg.allocate(MSG_SCRATCH_BYTES);
        }
        SharedRegion.Block scratch = msgScratch;
        if (scratch != null && size <= MSG_SCRATCH_BYTES) {
            msgScratch = null;
            e.msgInScratch = true;
            e.msgBlock = scratch;
        } else {
            e.msgBlock = reg.allocate(size);
        }
    }

    /** The result of {@code e} was read: its message block goes back (the scratch to the connection, others to the region). */
    void messageDone(SharedRegion reg, StubExecution e) {
        SharedRegion.Block mb = e.msgBlock;
        if (mb != null) {
            e.msgBlock = null;
            if (e.msgInScratch) {
                msgScratch = mb;
            } else {
                reg.free(mb);
            }
        }
    }

    /** Bytes of the scratch block while it is idle (held by no execution): not counted as in use. */
    long idleScratchBytes() {
        SharedRegion.Block idle = msgScratch;
        return idle == null ? 0 : idle.size();
    }

    /** Frees {@code r}'s blocks once the stub is done with it and its execution's result was read; at most once. */
    void releaseIfDone(SharedRegion reg, StubRequest r) {
        if (r.stubDone && r.exec.resultSeen && r.freed.compareAndSet(false, true)) {
            releaseBlocks(reg, r);
        }
    }

    /** Frees {@code r}'s blocks now; other classes call it only for a request the stub never saw (its message was not posted). */
    static void releaseBlocks(SharedRegion reg, StubRequest r) {
        for (SharedRegion.Block b : r.blocks) {
            reg.free(b);
        }
        r.blocks.clear();
        SharedRegion.Block cb = r.cancelBlock;
        if (cb != null) {
            reg.free(cb);
            r.cancelBlock = null;
        }
    }

    /** Writes the cancel flag of every live request whose client has cancelled since (monitor thread). */
    static void mirrorCancels(SharedRegion reg, Iterable<StubExecution> executions) {
        for (StubExecution e : executions) {
            for (StubRequest r : e.reqs) {
                if (!r.cancelMirrored && !r.freed.get() && r.sr.isCancelled()) {
                    SharedRegion.Block cb = r.cancelBlock;
                    if (cb != null) {
                        reg.hostSegment(cb).set(ValueLayout.JAVA_LONG, 0, 1L);
                    }
                    r.cancelMirrored = true;
                }
            }
        }
    }
}
