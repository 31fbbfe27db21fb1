package io.backplane.core.internal;

import com.sun.management.HotSpotDiagnosticMXBean;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.MemoryReservation;
import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The host-wide budget of bytes held by requests (O1): frontends reserve a body's size before they
 * read it and return it when the response is sent. A reservation that does not fit is refused at
 * once (RESOURCE_EXHAUSTED), never queued: a flood of large requests costs refusals, not the
 * process. Lock-free; reservations are counted with one CAS loop.
 */
public final class MemoryBudget {
    private final long limit;
    private final AtomicLong held = new AtomicLong();
    private final LongAdder refused = new LongAdder();

    public MemoryBudget(long limit) {
        if (limit <= 0) {
            throw new IllegalArgumentException("memory budget " + limit + " must be positive");
        }
        this.limit = limit;
    }

    /**
     * The default budget: a quarter of the smaller of the heap and the direct-memory limits. A
     * request's body is held once in direct memory while it arrives and about once more on the heap
     * while it is decoded and answered, so a quarter leaves room for both and for everything else.
     */
    public static long defaultLimit() {
        long heap = Runtime.getRuntime().maxMemory();
        long direct = maxDirectMemory();
        return Math.max(1L << 20, Math.min(heap, direct) / 4);
    }

    /** -XX:MaxDirectMemorySize, or the heap limit when it is not set (the JVM's own default). */
    static long maxDirectMemory() {
        long heap = Runtime.getRuntime().maxMemory();
        try {
            HotSpotDiagnosticMXBean hs = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
            long v = hs == null ? 0 : Long.parseLong(hs.getVMOption("MaxDirectMemorySize").getValue());
            return v > 0 ? v : heap;
        } catch (RuntimeException e) {
            return heap;
        }
    }

    public long limit() {
        return limit;
    }

    public MemoryReservation.Usage usage() {
        return new MemoryReservation.Usage(limit, held.get(), refused.sum());
    }

    /**
     * Reserves {@code bytes} for the request {@code what}.
     *
     * @throws BackplaneException RESOURCE_EXHAUSTED when they do not fit now
     */
    public MemoryReservation reserve(long bytes, String what) {
        Reservation r = new Reservation(what);
        r.grow(bytes);
        return r;
    }

    private void take(long bytes, long alreadyHeld, String what) {
        while (true) {
            long now = held.get();
            if (bytes > limit - now) {
                refused.increment();
                String why = bytes + alreadyHeld > limit
                        ? "it is larger than the whole budget of " + limit + " bytes; send it in smaller requests or raise the budget"
                        : "requests in progress hold " + now + " of the budget's " + limit + " bytes; retry later or raise the budget";
                throw new BackplaneException(ErrorCode.RESOURCE_EXHAUSTED, "the server cannot hold " + what + " (" + (bytes + alreadyHeld)
                        + " bytes) now: " + why + " (memory budget: embedded builder memoryBudget, backplane serve --memory-budget-bytes)");
            }
            if (held.compareAndSet(now, now + bytes)) {
                return;
            }
        }
    }

    private final class Reservation implements MemoryReservation {
        private final String what;
        private long bytes;
        private boolean closed;

        Reservation(String what) {
            this.what = what;
        }

        @Override
        public synchronized long bytes() {
            return bytes;
        }

        @Override
        public synchronized void grow(long more) {
            if (more < 0) {
                throw new IllegalArgumentException("more " + more + " is negative");
            }
            if (closed) {
                throw new IllegalStateException("the memory reservation of " + what + " is closed");
            }
            if (more > 0) {
                take(more, bytes, what);
                bytes += more;
            }
        }

        @Override
        public synchronized void close() {
            if (!closed) {
                closed = true;
                held.addAndGet(-bytes);
                bytes = 0;
            }
        }
    }
}
