package io.backplane.spi.host;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.ServiceLoader;
import org.jspecify.annotations.Nullable;

/**
 * Triton's CUDA shared-memory regions: device allocations of another process, registered by
 * their CUDA IPC handle, that inference requests name instead of sending tensor bytes. A GPU
 * backend provides the implementation ({@link Provider}, found through {@link ServiceLoader});
 * the frontends reach it through {@link FrontendContext#shared} with {@link #discover} and so
 * never depend on a GPU module. Where no provider is present or no GPU is usable,
 * {@link #available()} is false and the frontends refuse the extension.
 *
 * <p>Implementations are thread-safe; every error is a {@code BackplaneException} naming the bad
 * value. A region's mapping lives until it is unregistered and its last {@link Lease} is closed,
 * and is unmapped exactly once.
 */
public interface DeviceSharedMemory extends AutoCloseable {
    /** What {@code status} reports about one region, as Triton's status does. */
    record RegionStatus(String name, int deviceId, long byteSize) {
    }

    /** Whether a GPU is usable; when false every other call but {@link #close} throws UNSUPPORTED. */
    boolean available();

    /**
     * Registers {@code name}: opens {@code rawHandle} (a {@code cudaIpcMemHandle_t}) on device
     * {@code deviceId} as a region of {@code byteSize} bytes.
     */
    void register(String name, byte[] rawHandle, int deviceId, long byteSize);

    /** Every region, or only {@code name} (NOT_FOUND when it is not registered). */
    List<RegionStatus> status(@Nullable String name);

    /** Whether {@code name} is a registered region (for a frontend choosing between system and CUDA regions). */
    boolean contains(String name);

    /** Unregisters {@code name} (NOT_FOUND when it is not registered); its mapping goes with its last lease. */
    void unregister(String name);

    /** Unregisters every region. */
    void unregisterAll();

    /**
     * {@code byteSize} bytes at {@code offset} of region {@code name}, pinned until the lease
     * closes; {@code what} names the tensor in errors (INVALID_ARGUMENT for an unknown region or
     * a slice outside it).
     */
    Lease acquire(String name, long offset, long byteSize, String what);

    /** Unregisters everything; later registrations fail. */
    @Override
    void close();

    /** A bounds-checked slice of a region; close exactly once (later closes do nothing). */
    interface Lease extends AutoCloseable {
        long byteSize();

        /** Copies the slice's device bytes into {@code dst} (at least {@link #byteSize()} bytes). */
        void copyToHost(MemorySegment dst);

        /** Copies {@code bytes} of {@code src} to the start of the slice (at most {@link #byteSize()}). */
        void copyFromHost(MemorySegment src, long bytes);

        @Override
        void close();
    }

    /** Found through {@link ServiceLoader}; the GPU backend lists one. */
    interface Provider {
        /** A registry over the GPUs of this machine, or null when none is usable. */
        @Nullable DeviceSharedMemory open();
    }

    /** The registry of the first provider that finds a usable GPU, or {@link #unavailable()}. */
    static DeviceSharedMemory discover() {
        for (ClassLoader loader : new ClassLoader[] {Thread.currentThread().getContextClassLoader(), DeviceSharedMemory.class.getClassLoader()}) {
            if (loader == null) {
                continue;
            }
            for (Provider p : ServiceLoader.load(Provider.class, loader)) {
                DeviceSharedMemory d = p.open();
                if (d != null) {
                    return d;
                }
            }
        }
        return unavailable();
    }

    /** A registry without a GPU: {@link #available()} is false and nothing is registered. */
    static DeviceSharedMemory unavailable() {
        return Unavailable.INSTANCE;
    }
}

/**
 * The no-GPU registry: status lists nothing and unregister succeeds, as in Triton built without GPU
 * support (its clients unregister every CUDA region before using system shared memory); the
 * frontends refuse a register with their own sentence before calling it.
 */
enum Unavailable implements DeviceSharedMemory {
    INSTANCE;

    private static io.backplane.spi.BackplaneException refused() {
        return new io.backplane.spi.BackplaneException(io.backplane.spi.ErrorCode.UNSUPPORTED, "CUDA shared memory is not supported: no usable GPU");
    }

    @Override
    public boolean available() {
        return false;
    }

    @Override
    public void register(String name, byte[] rawHandle, int deviceId, long byteSize) {
        throw refused();
    }

    /** As Triton built without GPU support: no region; a named one is not found. */
    @Override
    public List<RegionStatus> status(@Nullable String name) {
        if (name != null) {
            throw io.backplane.spi.BackplaneException.notFound("Unable to find shared memory region: '" + name + "'; this server has no usable GPU,"
                    + " so no CUDA shared-memory region is ever registered");
        }
        return List.of();
    }

    @Override
    public boolean contains(String name) {
        return false;
    }

    /** Nothing to unregister: succeeds, as Triton's unregister of a region it does not hold (clients unregister everything first). */
    @Override
    public void unregister(String name) {
    }

    @Override
    public void unregisterAll() {
    }

    @Override
    public Lease acquire(String name, long offset, long byteSize, String what) {
        throw refused();
    }

    @Override
    public void close() {
    }
}
