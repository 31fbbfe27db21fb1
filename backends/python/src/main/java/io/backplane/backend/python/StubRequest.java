package io.backplane.backend.python;

import io.backplane.spi.ScheduledRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;

/**
 * One request of a {@link StubExecution}: the host's side ends it once ({@link #hostDone},
 * compare-and-set; P3), and its shared memory ({@link #blocks}, {@link #cancelBlock}) is freed
 * once ({@link #freed}) only after the stub is done with it ({@link #stubDone}; P4). A plain
 * holder, like its execution.
 */
final class StubRequest {
    final ScheduledRequest sr;
    final int index;
    final StubExecution exec;
    final AtomicBoolean hostDone = new AtomicBoolean();
    final AtomicBoolean freed = new AtomicBoolean();
    final List<SharedRegion.Block> blocks = new ArrayList<>();
    volatile boolean stubDone;
    /** The stub released this request with RESCHEDULE: it runs again in a later execution, under a new request. */
    volatile boolean rescheduled;
    SharedRegion.@Nullable Block cancelBlock;
    boolean cancelMirrored;

    StubRequest(ScheduledRequest sr, int index, StubExecution exec) {
        this.sr = sr;
        this.index = index;
        this.exec = exec;
    }
}
