package io.backplane.backend.cuda;

import io.backplane.spi.Backend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ModelContext;
import io.backplane.spi.Settings;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The cuda backend: loads kernel modules onto the GPUs a model's {@code instance_group} names and
 * keeps one {@link DeviceContext} per GPU in use, shared by every model on it and released with
 * the last of them.
 *
 * <p>Thread-safe: models load and close concurrently; device contexts are counted under this
 * backend's lock.
 */
final class CudaBackend implements Backend {
    static final String OPTION_LIBRARY = "library";
    static final String OPTION_MEMORY_LIMIT = "memory_limit_bytes";

    private static final Logger LOG = LoggerFactory.getLogger(CudaBackend.class);

    private final CudaLibrary.Status status;
    private final long memoryLimitBytes;
    private final Map<Integer, DeviceContext> devices = new HashMap<>();
    private boolean closed;

    CudaBackend(CudaLibrary.Status status, Map<String, String> options) {
        this.status = status;
        for (String key : options.keySet()) {
            if (!key.equals(OPTION_LIBRARY) && !key.equals(OPTION_MEMORY_LIMIT)) {
                throw BackplaneException.invalid("cuda backend: unknown backend option '" + key + "'; known options: ["
                        + OPTION_LIBRARY + ", " + OPTION_MEMORY_LIMIT + "]");
            }
        }
        this.memoryLimitBytes = Settings.of("cuda backend", options, Map.of()).number(OPTION_MEMORY_LIMIT, 0, 0, Long.MAX_VALUE);
        if (!status.usable()) {
            LOG.info("cuda backend started without a usable GPU: {}", status.problem());
        }
    }

    /** The devices the driver sees, 0 without a usable driver: where the core may place KIND_AUTO instances. */
    @Override
    public int deviceCount() {
        return status.usable() ? status.deviceCount() : 0;
    }

    /** Whether the driver is usable, and if not why. */
    CudaLibrary.Status status() {
        return status;
    }

    @Override
    public CudaModel loadModel(ModelContext context) throws IOException {
        ModelConfig config = context.config();
        String model = "model '" + context.name() + "' version " + context.version();
        if (config.decoupled()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, model + " is decoupled, but the cuda backend answers each request"
                    + " with exactly one response; remove model_transaction_policy { decoupled: true }");
        }
        LaunchSpec spec = LaunchSpec.from(config);
        checkKinds(config, model);
        ModuleImage image = readModule(context, spec, model);
        if (!status.usable()) {
            throw BackplaneException.unavailable(model + " needs a GPU, but " + status.problem());
        }
        if (image.requiredDriverVersion() > status.driverVersion()) {
            throw BackplaneException.invalid(model + ": " + image.fileName() + " is PTX ISA " + image.ptxVersionString()
                    + ", which needs a driver for CUDA " + CudaLibrary.versionString(image.requiredDriverVersion())
                    + " or newer, but this driver supports CUDA " + CudaLibrary.versionString(status.driverVersion())
                    + "; regenerate the PTX with an older ISA .version (see gen-ptx.sh) or update the NVIDIA driver");
        }
        CudaModel loaded = new CudaModel(this, context, spec, image);
        try {
            for (int ordinal : gpus(config, model)) {
                loaded.moduleOn(ordinal);
            }
        } catch (RuntimeException e) {
            loaded.close();
            throw e;
        }
        return loaded;
    }

    private static void checkKinds(ModelConfig config, String model) {
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.CPU) {
                throw BackplaneException.invalid(model + ": instance_group '" + g.name()
                        + "' is KIND_CPU, but the cuda backend runs on GPUs only; use KIND_GPU (optionally with gpus: [...])");
            }
        }
    }

    /**
     * The GPU ordinals the config's instance groups place instances on, checked against the
     * devices the driver sees; the module is loaded on each at model load. A group without
     * {@code gpus} is placed on GPU 0, as the core places it; an instance the core places
     * elsewhere gets the module loaded when it is created.
     */
    private List<Integer> gpus(ModelConfig config, String model) {
        TreeSet<Integer> out = new TreeSet<>();
        if (config.instanceGroups().isEmpty()) {
            out.add(0);
        }
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.gpus().isEmpty()) {
                out.add(0);
            }
            for (int gpu : g.gpus()) {
                checkOrdinal(gpu, model + ": instance_group '" + g.name() + "'");
                out.add(gpu);
            }
        }
        return new ArrayList<>(out);
    }

    void checkOrdinal(int gpu, String where) {
        if (gpu < 0 || gpu >= status.deviceCount()) {
            throw BackplaneException.invalid(where + " asks for GPU " + gpu + " but the CUDA driver sees " + status.deviceCount()
                    + " device(s)" + (status.deviceCount() > 0 ? " (0.." + (status.deviceCount() - 1) + ")" : "")
                    + "; check gpus: [...] and CUDA_VISIBLE_DEVICES");
        }
    }

    private static ModuleImage readModule(ModelContext context, LaunchSpec spec, String model) throws IOException {
        Path dir = context.versionDirectory();
        Path file;
        if (!spec.moduleFile().isEmpty()) {
            file = dir.resolve(spec.moduleFile());
        } else if (!context.config().defaultModelFilename().isEmpty()) {
            file = dir.resolve(context.config().defaultModelFilename());
        } else {
            file = Files.exists(dir.resolve("model.ptx")) ? dir.resolve("model.ptx") : dir.resolve("model.cubin");
        }
        context.checkedFile(file, "CUDA module"); // the host's rule for links out of the model repository
        if (!Files.isRegularFile(file)) {
            throw BackplaneException.invalid(model + ": CUDA module " + file + " does not exist; put a PTX or cubin file there"
                    + " (default model.ptx or model.cubin) or name it with parameter '" + LaunchSpec.MODULE_FILE + "'");
        }
        ModuleImage image = ModuleImage.parse(file.getFileName().toString(), Files.readAllBytes(file));
        if (image.kind() == ModuleImage.Kind.PTX) {
            List<Integer> params = image.entryParameters(spec.kernel());
            if (params == null) {
                throw BackplaneException.invalid(model + ": " + image.fileName() + " has no kernel entry '" + spec.kernel()
                        + "'; its entries are " + image.entries().keySet() + " (a C++ kernel needs extern \"C\" or its mangled name)");
            }
            if (!params.equals(spec.argumentSizes())) {
                throw BackplaneException.invalid(model + ": kernel '" + spec.kernel() + "' in " + image.fileName() + " takes "
                        + params.size() + " parameter(s) of sizes " + params + " bytes, but " + LaunchSpec.KERNEL_ARGS + " passes "
                        + spec.args().size() + " of sizes " + spec.argumentSizes() + " (" + spec.args() + ")");
            }
        }
        return image;
    }

    /** The device context of {@code ordinal}, one reference more; created on first use. */
    synchronized DeviceContext acquireDevice(int ordinal) {
        if (closed) {
            throw BackplaneException.unavailable("the cuda backend is closed");
        }
        DeviceContext d = devices.get(ordinal);
        if (d == null) {
            d = new DeviceContext(status.requireDriver(), ordinal, memoryLimitBytes);
            devices.put(ordinal, d);
            LOG.info("GPU {} ({}): primary context retained", ordinal, d.name());
        }
        d.addReference();
        return d;
    }

    /** One reference less; the last one frees the device's memory and releases its context. */
    synchronized void releaseDevice(DeviceContext d) {
        if (d.isClosed()) {
            return; // the backend closed it already
        }
        if (d.removeReference()) {
            devices.remove(d.ordinal());
            d.close();
            LOG.info("GPU {} ({}): primary context released", d.ordinal(), d.name());
        }
    }

    /** The device context of {@code ordinal} if any model uses it; for accounting and tests. */
    synchronized @Nullable DeviceContext device(int ordinal) {
        return devices.get(ordinal);
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (DeviceContext d : devices.values()) {
            LOG.warn("GPU {}: still referenced by {} model(s) at backend close; releasing it", d.ordinal(), d.references());
            d.close();
        }
        devices.clear();
    }
}
