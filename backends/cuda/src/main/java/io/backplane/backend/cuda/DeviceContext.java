package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One GPU as the backend uses it: the device's primary context (retained once,
 * {@code cuDevicePrimaryCtxRetain}), its memory pool, and the instances running on it.
 *
 * <p><b>Faults.</b> A sticky error (a kernel fault such as {@code CUDA_ERROR_ILLEGAL_ADDRESS})
 * poisons the whole context: every instance on the device reports failure at once, so the core
 * fails their open requests and recreates them. Recreation ({@link #recoverIfFaulted}) resets the
 * primary context once every old instance is gone; allocations and modules of the old context
 * are dropped (the generation number tells old from new). The CUDA documentation says a process
 * may have to restart after such errors; if the reset does not help, instance creation keeps
 * failing with the original error named, and other devices are not affected.
 *
 * <p>Thread-safe. {@link #enter} makes the context current on the calling thread for the
 * duration of a scope: instances execute on whatever core thread calls them.
 */
final class DeviceContext {
    private static final Logger LOG = LoggerFactory.getLogger(DeviceContext.class);

    private final CudaDriver driver;
    private final int ordinal;
    private final int device;
    private final String name;
    private final DeviceMemoryPool pool;
    private final Set<CudaInstance> instances = ConcurrentHashMap.newKeySet();
    private volatile long context;
    private volatile int generation;
    private volatile @Nullable CudaException fault;
    private int references; // guarded by the backend's lock
    private volatile boolean closed;

    /** A scope in which this device's context is current; closing pops it. */
    interface Scope extends AutoCloseable {
        @Override
        void close();
    }

    DeviceContext(CudaDriver driver, int ordinal, long memoryLimitBytes) {
        this.driver = driver;
        this.ordinal = ordinal;
        this.device = driver.device(ordinal);
        this.name = driver.deviceName(device);
        this.context = driver.primaryContextRetain(device);
        this.pool = new DeviceMemoryPool(this, memoryLimitBytes);
    }

    CudaDriver driver() {
        return driver;
    }

    int ordinal() {
        return ordinal;
    }

    int device() {
        return device;
    }

    String name() {
        return name;
    }

    DeviceMemoryPool pool() {
        return pool;
    }

    int generation() {
        return generation;
    }

    @Nullable CudaException fault() {
        return fault;
    }

    int references() {
        return references;
    }

    void addReference() {
        references++;
    }

    /** @return whether this was the last reference */
    boolean removeReference() {
        return --references == 0;
    }

    /** Pushes the context on the calling thread; the scope pops it. */
    Scope enter() {
        if (closed) {
            throw BackplaneException.unavailable("GPU " + ordinal + ": the cuda backend released this device (backend closed)");
        }
        driver.contextPush(context);
        return () -> driver.contextPop();
    }

    void register(CudaInstance instance) {
        instances.add(instance);
    }

    void unregister(CudaInstance instance) {
        instances.remove(instance);
    }

    int instanceCount() {
        return instances.size();
    }

    /** Records a sticky fault and has every instance on this device report failure. */
    void markFaulted(CudaException cause) {
        synchronized (this) {
            if (fault == null) {
                fault = cause;
                LOG.error("GPU {} ({}): sticky CUDA error, every instance on it will be recreated: {}", ordinal, name, cause.getMessage());
            }
        }
        for (CudaInstance i : instances) {
            i.reportFailure(cause);
        }
    }

    /**
     * Before an instance is created: when the device is faulted and no old instance remains,
     * resets the primary context and starts a new generation.
     *
     * @throws BackplaneException UNAVAILABLE while old instances still hold the faulted context,
     *     or when the reset fails (the original fault is named)
     */
    synchronized void recoverIfFaulted() {
        CudaException f = fault;
        if (f == null) {
            return;
        }
        if (!instances.isEmpty()) {
            throw BackplaneException.unavailable("GPU " + ordinal + " is recovering from " + f.resultName() + "; " + instances.size()
                    + " failed instance(s) still hold its context, retry shortly");
        }
        try {
            driver.primaryContextReset(device);
            long fresh = driver.primaryContextRetain(device);
            driver.primaryContextRelease(device);
            context = fresh;
        } catch (CudaException e) {
            throw new BackplaneException(e.code(), "GPU " + ordinal + " cannot recover from " + f.getMessage() + ": resetting its context failed: "
                    + e.getMessage() + "; the CUDA documentation says the process must be restarted to use this device again", e);
        }
        pool.invalidate();
        generation++;
        fault = null;
        LOG.warn("GPU {} ({}): primary context reset after {}, generation {}", ordinal, name, f.resultName(), generation);
    }

    /** Whether {@link #close} ran: the context is released and nothing may use it. */
    boolean isClosed() {
        return closed;
    }

    /** Frees whatever is left and releases the primary context. Idempotent; called by the backend at the last reference or at its close. */
    synchronized void close() {
        if (closed) {
            return;
        }
        if (!instances.isEmpty()) {
            LOG.warn("GPU {}: closing with {} instance(s) still open", ordinal, instances.size());
        }
        pool.closeAll();
        closed = true;
        try {
            driver.primaryContextRelease(device);
        } catch (CudaException e) {
            LOG.warn("GPU {}: releasing the primary context failed: {}", ordinal, e.getMessage());
        }
    }
}
