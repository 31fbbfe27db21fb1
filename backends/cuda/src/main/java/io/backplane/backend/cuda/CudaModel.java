package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.InstanceKind;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One loaded model version: its launch spec, its module image, and the module loaded on each GPU
 * it has instances on (each holding one reference to that GPU's {@link DeviceContext}).
 *
 * <p>Thread-safe: instances are created concurrently; {@link #close} comes once, after they all
 * closed.
 */
final class CudaModel implements Model {
    private static final Logger LOG = LoggerFactory.getLogger(CudaModel.class);

    private final CudaBackend backend;
    private final ModelContext context;
    private final LaunchSpec spec;
    private final ModuleImage image;
    private final String owner;
    private final Map<Integer, DeviceModule> modules = new HashMap<>();
    private boolean closed;

    /** The module on one device, valid for one context generation. */
    record DeviceModule(DeviceContext device, long module, long function, int generation) {
    }

    CudaModel(CudaBackend backend, ModelContext context, LaunchSpec spec, ModuleImage image) {
        this.backend = backend;
        this.context = context;
        this.spec = spec;
        this.image = image;
        this.owner = "model '" + context.name() + "' version " + context.version();
    }

    LaunchSpec spec() {
        return spec;
    }

    ModelContext context() {
        return context;
    }

    String owner() {
        return owner;
    }

    @Override
    public CudaInstance createInstance(InstanceContext instance) {
        if (instance.kind() == InstanceKind.CPU) {
            throw BackplaneException.invalid(owner + ": instance " + instance.name() + " is KIND_CPU; the cuda backend runs on GPUs only");
        }
        int ordinal = instance.deviceId();
        backend.checkOrdinal(ordinal, owner + ": instance " + instance.name());
        DeviceModule m = moduleOn(ordinal);
        return new CudaInstance(this, instance, m);
    }

    /** The module on GPU {@code ordinal}, loading it (again, after a context reset) when needed. */
    synchronized DeviceModule moduleOn(int ordinal) {
        if (closed) {
            throw BackplaneException.unavailable(owner + " is closed");
        }
        DeviceModule m = modules.get(ordinal);
        DeviceContext device = m != null ? m.device() : backend.acquireDevice(ordinal);
        try {
            device.recoverIfFaulted();
            if (m != null && m.generation() == device.generation()) {
                return m;
            }
            int generation = device.generation();
            long module;
            long function;
            try (DeviceContext.Scope _ = device.enter()) {
                module = device.driver().moduleLoadData(image.bytes());
                try {
                    function = device.driver().moduleGetFunction(module, spec.kernel());
                    int maxThreads = device.driver().functionAttribute(CudaDriver.FUNCTION_MAX_THREADS_PER_BLOCK, function);
                    if (maxThreads < spec.blockSize()) {
                        throw BackplaneException.invalid(owner + ": block_size " + spec.blockSize() + " exceeds the " + maxThreads
                                + " threads per block kernel '" + spec.kernel() + "' allows on GPU " + ordinal + " (" + device.name()
                                + "); lower block_size");
                    }
                } catch (RuntimeException e) {
                    device.driver().moduleUnload(module);
                    throw e;
                }
            } catch (CudaException e) {
                throw new BackplaneException(e.code(), owner + ": loading " + image.fileName() + " (kernel '" + spec.kernel() + "') on GPU "
                        + ordinal + " (" + device.name() + ") failed: " + e.getMessage(), e);
            }
            DeviceModule fresh = new DeviceModule(device, module, function, generation);
            modules.put(ordinal, fresh);
            LOG.debug("{}: {} loaded on GPU {} (generation {})", owner, image.fileName(), ordinal, generation);
            return fresh;
        } catch (RuntimeException e) {
            if (m == null) {
                backend.releaseDevice(device);
            }
            throw e;
        }
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (DeviceModule m : modules.values()) {
            DeviceContext d = m.device();
            if (m.generation() == d.generation() && d.fault() == null && !d.isClosed()) {
                try (DeviceContext.Scope _ = d.enter()) {
                    d.driver().moduleUnload(m.module());
                } catch (CudaException e) {
                    LOG.warn("{}: unloading its module on GPU {} failed: {}", owner, d.ordinal(), e.getMessage());
                }
            }
            backend.releaseDevice(d);
        }
        modules.clear();
    }
}
