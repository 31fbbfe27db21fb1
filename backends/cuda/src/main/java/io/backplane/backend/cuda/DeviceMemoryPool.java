package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every device allocation and pinned host allocation of one device, with accounting: bytes in
 * use, peak, live buffers and their owners, and an optional limit.
 *
 * <p>An allocation is a hold: its owner (an instance) closes it, and closing is idempotent, so a
 * buffer is freed exactly once whatever path closes it. {@link #closeAll} frees what owners
 * forgot (logged as a leak) when the device context goes away. After a context reset
 * ({@link #invalidate}), the driver has already destroyed every allocation: closing an old buffer
 * then only updates the accounting and never calls {@code cuMemFree} on a dead pointer.
 *
 * <p>Thread-safe.
 */
final class DeviceMemoryPool {
    private static final Logger LOG = LoggerFactory.getLogger(DeviceMemoryPool.class);

    private final DeviceContext device;
    private final long limitBytes;
    private final Map<Buffer, Boolean> live = new ConcurrentHashMap<>();
    private final AtomicLong deviceBytes = new AtomicLong();
    private final AtomicLong pinnedBytes = new AtomicLong();
    private final AtomicLong peakDeviceBytes = new AtomicLong();
    private final AtomicLong allocations = new AtomicLong();
    private final AtomicLong frees = new AtomicLong();

    /** @param limitBytes the most device memory this pool may hold; 0 for no limit but the device's */
    DeviceMemoryPool(DeviceContext device, long limitBytes) {
        this.device = device;
        this.limitBytes = limitBytes;
    }

    /** A snapshot of the accounting. */
    record Stats(long deviceBytes, long peakDeviceBytes, long pinnedBytes, int liveBuffers, long allocations, long frees) {
    }

    Stats stats() {
        return new Stats(deviceBytes.get(), peakDeviceBytes.get(), pinnedBytes.get(), live.size(), allocations.get(), frees.get());
    }

    /** Device bytes held by {@code owner}. */
    long deviceBytesOwnedBy(String owner) {
        return live.keySet().stream().filter(b -> b instanceof DeviceBuffer && b.owner.equals(owner)).mapToLong(b -> b.size).sum();
    }

    /**
     * Allocates {@code bytes} (≥ 1) of device memory for {@code owner}.
     *
     * @throws BackplaneException RESOURCE_EXHAUSTED over the pool's limit; {@link CudaException} when the driver refuses
     */
    DeviceBuffer allocate(long bytes, String owner) {
        if (bytes < 1) {
            throw new IllegalArgumentException("allocation of " + bytes + " bytes for " + owner);
        }
        long now = deviceBytes.addAndGet(bytes);
        if (limitBytes > 0 && now > limitBytes) {
            deviceBytes.addAndGet(-bytes);
            throw new BackplaneException(ErrorCode.RESOURCE_EXHAUSTED, owner + " needs " + bytes + " bytes on GPU " + device.ordinal()
                    + " but the cuda backend's memory_limit_bytes is " + limitBytes + " and " + (now - bytes)
                    + " bytes are in use; raise the limit or lower max_batch_size");
        }
        long pointer;
        int generation = device.generation();
        try (DeviceContext.Scope _ = device.enter()) {
            pointer = device.driver().memAlloc(bytes);
        } catch (RuntimeException e) {
            deviceBytes.addAndGet(-bytes);
            throw e;
        }
        peakDeviceBytes.accumulateAndGet(now, Math::max);
        allocations.incrementAndGet();
        DeviceBuffer b = new DeviceBuffer(this, pointer, bytes, owner, generation);
        live.put(b, Boolean.TRUE);
        return b;
    }

    /**
     * Allocates {@code bytes} (≥ 1) of page-locked host memory for {@code owner}, for staging copies.
     *
     * @throws CudaException when the driver refuses
     */
    PinnedBuffer allocatePinned(long bytes, String owner) {
        if (bytes < 1) {
            throw new IllegalArgumentException("pinned allocation of " + bytes + " bytes for " + owner);
        }
        MemorySegment segment;
        int generation = device.generation();
        try (DeviceContext.Scope _ = device.enter()) {
            segment = device.driver().memHostAlloc(bytes);
        }
        pinnedBytes.addAndGet(bytes);
        allocations.incrementAndGet();
        PinnedBuffer b = new PinnedBuffer(this, segment, owner, generation);
        live.put(b, Boolean.TRUE);
        return b;
    }

    /** Forgets every live allocation's memory after a context reset destroyed it; owners still close their buffers. */
    void invalidate() {
        live.keySet().forEach(b -> b.dead = true);
    }

    /** Frees every buffer still live (a leak by its owner, logged). Called when the device context closes. */
    void closeAll() {
        List<Buffer> leaked = List.copyOf(live.keySet());
        for (Buffer b : leaked) {
            LOG.warn("GPU {}: freeing {} bytes still held by {} at close", device.ordinal(), b.size, b.owner);
            b.close();
        }
    }

    private void release(Buffer b) {
        live.remove(b);
        frees.incrementAndGet();
        boolean pinned = b instanceof PinnedBuffer;
        (pinned ? pinnedBytes : deviceBytes).addAndGet(-b.size);
        if (b.dead || b.generation != device.generation() || device.fault() != null || device.isClosed()) {
            return; // the context reset destroyed it already, or will (a faulted context fails every call)
        }
        try (DeviceContext.Scope _ = device.enter()) {
            if (b instanceof PinnedBuffer p) {
                device.driver().memFreeHost(p.segment());
            } else {
                device.driver().memFree(((DeviceBuffer) b).pointer());
            }
        } catch (RuntimeException e) {
            LOG.warn("GPU {}: freeing {} bytes of {} failed: {}", device.ordinal(), b.size, b.owner, e.getMessage());
        }
    }

    /** An allocation; closing it frees it exactly once. */
    abstract static sealed class Buffer implements AutoCloseable permits DeviceBuffer, PinnedBuffer {
        private final DeviceMemoryPool pool;
        private final long size;
        private final String owner;
        private final int generation;
        private final AtomicBoolean closed = new AtomicBoolean();
        private volatile boolean dead;

        Buffer(DeviceMemoryPool pool, long size, String owner, int generation) {
            this.pool = pool;
            this.size = size;
            this.owner = owner;
            this.generation = generation;
        }

        long size() {
            return size;
        }

        boolean isClosed() {
            return closed.get();
        }

        /** Frees the allocation; idempotent. */
        @Override
        public final void close() {
            if (closed.compareAndSet(false, true)) {
                pool.release(this);
            }
        }
    }

    /** Device memory: a {@code CUdeviceptr} and its size. */
    static final class DeviceBuffer extends Buffer {
        private final long pointer;

        DeviceBuffer(DeviceMemoryPool pool, long pointer, long size, String owner, int generation) {
            super(pool, size, owner, generation);
            this.pointer = pointer;
        }

        long pointer() {
            return pointer;
        }
    }

    /** Page-locked host memory. */
    static final class PinnedBuffer extends Buffer {
        private final MemorySegment segment;

        PinnedBuffer(DeviceMemoryPool pool, MemorySegment segment, String owner, int generation) {
            super(pool, segment.byteSize(), owner, generation);
            this.segment = segment;
        }

        MemorySegment segment() {
            return segment;
        }
    }
}
