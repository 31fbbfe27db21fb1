package io.backplane.backend.cuda;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.DeviceSharedMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * Triton's CUDA shared-memory regions over the driver: a register retains the device's primary
 * context and opens the client's {@code cudaIpcMemHandle_t} there ({@code cuIpcOpenMemHandle});
 * requests copy device→host for inputs and host→device for outputs ({@code cuMemcpyDtoH} /
 * {@code cuMemcpyHtoD}) through a bounds-checked {@link Lease}.
 *
 * <p>Unregistering removes the name at once; the mapping is closed ({@code cuIpcCloseMemHandle},
 * then the context released) when the registration and every lease on it are gone: a reference
 * count reaching zero, so it happens exactly once whatever the interleaving of unregister,
 * unregister-all, close and leases.
 *
 * <p>Errors lead with Triton's sentences where Triton has one ({@code shared memory region
 * '<r>' already in manager}, {@code Unable to find shared memory region: '<r>'}, {@code Invalid
 * offset + byte size for shared memory region: '<r>'}), then what is wrong and what to do.
 */
public final class CudaSharedMemoryRegistry implements DeviceSharedMemory {
    private final CudaDriver driver;
    private final Map<String, Region> regions = new TreeMap<>();
    private boolean closed;

    /** A registry over {@code driver}, already initialised ({@code cuInit}). */
    CudaSharedMemoryRegistry(CudaDriver driver) {
        this.driver = requireNonNull(driver, "driver is null");
    }

    /** The {@link DeviceSharedMemory.Provider} of this backend: a registry when libcuda is usable. */
    public static final class Provider implements DeviceSharedMemory.Provider {
        @Override
        public @Nullable DeviceSharedMemory open() {
            CudaLibrary.Status s = CudaLibrary.load(CudaLibrary.DEFAULT_LIBRARY);
            return s.usable() ? new CudaSharedMemoryRegistry(s.requireDriver()) : null;
        }
    }

    @Override
    public boolean available() {
        return true;
    }

    @Override
    public void register(String name, byte[] rawHandle, int deviceId, long byteSize) {
        requireNonNull(name, "name is null");
        requireNonNull(rawHandle, "rawHandle is null");
        if (name.isEmpty()) {
            throw BackplaneException.invalid("CUDA shared-memory region name is empty");
        }
        if (rawHandle.length != CudaDriver.IPC_HANDLE_BYTES) {
            throw BackplaneException.invalid("failed to register CUDA shared memory region '" + name + "': raw_handle is " + rawHandle.length
                    + " bytes but a cudaIpcMemHandle_t is " + CudaDriver.IPC_HANDLE_BYTES + "; send the bytes of cudaIpcGetMemHandle unchanged");
        }
        if (byteSize <= 0) {
            throw BackplaneException.invalid("failed to register CUDA shared memory region '" + name + "': byte_size " + byteSize + " must be positive");
        }
        synchronized (this) {
            if (closed) {
                throw BackplaneException.unavailable("CUDA shared-memory registry is closed");
            }
            if (regions.containsKey(name)) {
                throw BackplaneException.invalid("shared memory region '" + name + "' already in manager; unregister it first");
            }
            int count = driver.deviceCount();
            if (deviceId < 0 || deviceId >= count) {
                throw BackplaneException.invalid("failed to register CUDA shared memory region '" + name + "': device_id " + deviceId
                        + " is not a GPU of this server (it sees " + count + ", ids 0.." + (count - 1) + ")");
            }
            int device = driver.device(deviceId);
            long context = driver.primaryContextRetain(device);
            long pointer;
            driver.contextPush(context);
            try {
                pointer = driver.ipcOpenMemHandle(rawHandle);
            } catch (CudaException e) {
                popQuietly();
                driver.primaryContextRelease(device);
                throw BackplaneException.invalid("failed to open CUDA IPC handle of region '" + name + "' on device " + deviceId + ": "
                        + e.getMessage() + "; the handle must come from cudaIpcGetMemHandle in a live process on the same machine");
            }
            driver.contextPop();
            regions.put(name, new Region(name, deviceId, device, context, pointer, byteSize));
        }
    }

    private void popQuietly() {
        try {
            driver.contextPop();
        } catch (CudaException ignored) {
            // the open failed; the context stack is what matters and the pop of our push cannot leave it wrong
        }
    }

    @Override
    public synchronized List<RegionStatus> status(@Nullable String name) {
        if (name != null) {
            Region r = regions.get(name);
            if (r == null) {
                throw BackplaneException.notFound("Unable to find shared memory region: '" + name + "'");
            }
            return List.of(r.status());
        }
        return regions.values().stream().map(Region::status).toList();
    }

    @Override
    public synchronized boolean contains(String name) {
        return regions.containsKey(name);
    }

    @Override
    public void unregister(String name) {
        Region r;
        synchronized (this) {
            r = regions.remove(name);
        }
        if (r == null) {
            throw BackplaneException.notFound("Unable to find shared memory region: '" + name + "'");
        }
        r.release();
    }

    @Override
    public void unregisterAll() {
        List<Region> all;
        synchronized (this) {
            all = new ArrayList<>(regions.values());
            regions.clear();
        }
        all.forEach(Region::release);
    }

    @Override
    public DeviceSharedMemory.Lease acquire(String name, long offset, long byteSize, String what) {
        Region r;
        synchronized (this) {
            r = regions.get(name);
            if (r == null) {
                throw BackplaneException.invalid(what + ": Unable to find shared memory region: '" + name + "'");
            }
            r.refs.incrementAndGet();
        }
        if (offset < 0 || byteSize < 0 || offset > r.byteSize || byteSize > r.byteSize - offset) {
            r.release();
            throw BackplaneException.invalid(what + ": Invalid offset + byte size for shared memory region: '" + name + "' (shared_memory_offset "
                    + offset + " + shared_memory_byte_size " + byteSize + " is outside its " + r.byteSize + " bytes)");
        }
        return new Lease(r, offset, byteSize);
    }

    @Override
    public void close() {
        synchronized (this) {
            closed = true;
        }
        unregisterAll();
    }

    private final class Lease implements DeviceSharedMemory.Lease {
        private final Region region;
        private final long offset;
        private final long byteSize;
        private final AtomicBoolean closed = new AtomicBoolean();

        Lease(Region region, long offset, long byteSize) {
            this.region = region;
            this.offset = offset;
            this.byteSize = byteSize;
        }

        @Override
        public long byteSize() {
            return byteSize;
        }

        @Override
        public void copyToHost(MemorySegment dst) {
            if (dst.byteSize() < byteSize) {
                throw new IllegalArgumentException("destination of " + dst.byteSize() + " bytes is smaller than the slice of " + byteSize);
            }
            if (byteSize == 0) {
                return;
            }
            region.inContext(() -> {
                if (dst.isNative()) {
                    driver.memcpyDtoH(dst, region.pointer + offset, byteSize);
                } else {
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment tmp = a.allocate(byteSize, 64);
                        driver.memcpyDtoH(tmp, region.pointer + offset, byteSize);
                        MemorySegment.copy(tmp, 0, dst, 0, byteSize);
                    }
                }
            });
        }

        @Override
        public void copyFromHost(MemorySegment src, long bytes) {
            if (bytes > byteSize || bytes > src.byteSize() || bytes < 0) {
                throw BackplaneException.invalid(bytes + " bytes do not fit the slice of " + byteSize + " bytes of CUDA shared memory region '"
                        + region.name + "'; register a larger region");
            }
            if (bytes == 0) {
                return;
            }
            region.inContext(() -> {
                if (src.isNative()) {
                    driver.memcpyHtoD(region.pointer + offset, src, bytes);
                } else {
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment tmp = a.allocate(bytes, 64);
                        MemorySegment.copy(src, 0, tmp, 0, bytes);
                        driver.memcpyHtoD(region.pointer + offset, tmp, bytes);
                    }
                }
            });
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                region.release();
            }
        }
    }

    private final class Region {
        final String name;
        final int deviceId;
        final int device;
        final long context;
        final long pointer;
        final long byteSize;
        /** One for the registration, one per lease; at zero the IPC mapping is closed, once. */
        final AtomicInteger refs = new AtomicInteger(1);

        Region(String name, int deviceId, int device, long context, long pointer, long byteSize) {
            this.name = name;
            this.deviceId = deviceId;
            this.device = device;
            this.context = context;
            this.pointer = pointer;
            this.byteSize = byteSize;
        }

        RegionStatus status() {
            return new RegionStatus(name, deviceId, byteSize);
        }

        void inContext(Runnable work) {
            driver.contextPush(context);
            try {
                work.run();
            } catch (CudaException e) {
                throw BackplaneException.wrap(e, "CUDA shared memory region '" + name + "'");
            } finally {
                driver.contextPop();
            }
        }

        void release() {
            if (refs.decrementAndGet() != 0) {
                return;
            }
            try {
                driver.contextPush(context);
                try {
                    driver.ipcCloseMemHandle(pointer);
                } finally {
                    driver.contextPop();
                }
            } catch (CudaException e) {
                org.slf4j.LoggerFactory.getLogger(CudaSharedMemoryRegistry.class).warn("closing the IPC handle of CUDA shared memory region '{}' failed: {}",
                        name, e.getMessage());
            } finally {
                driver.primaryContextRelease(device);
            }
        }
    }
}
