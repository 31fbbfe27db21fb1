package io.backplane.backend.torch;

import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.JniUtils;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import org.slf4j.Logger;

/** One loaded TorchScript model version; each instance loads its own copy of the module, as Triton's backend does. */
final class TorchModel implements Model {
    private final String name;
    private final ModelConfig config;
    private final Path file;
    private final Bindings bindings;
    private final TorchSettings settings;
    private final Engine engine;

    TorchModel(String name, ModelConfig config, Path file, Bindings bindings, TorchSettings settings, Engine engine) {
        this.name = name;
        this.config = config;
        this.file = file;
        this.bindings = bindings;
        this.settings = settings;
        this.engine = engine;
    }

    /**
     * libtorch's inter-op pool size is process-wide and can be set only before its first parallel
     * work; later it refuses, which is logged, not fatal (Triton's backend behaves the same way).
     */
    static synchronized void interOpThreads(String model, int n, Logger log) {
        if (JniUtils.getNumInteropThreads() == n) {
            return;
        }
        try {
            JniUtils.setNumInteropThreads(n);
            log.info("model '{}': INTER_OP_THREAD_COUNT {} (libtorch's inter-op pool is process-wide)", model, n);
        } catch (RuntimeException e) {
            log.warn("model '{}': INTER_OP_THREAD_COUNT {} not applied: libtorch sets its inter-op pool once per process, before its first"
                    + " parallel work ({}); it stays {}", model, n, e.getMessage(), JniUtils.getNumInteropThreads());
        }
    }

    @Override
    public ModelInstance createInstance(InstanceContext context) {
        if (context.kind() == InstanceKind.GPU) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + name + "' instance " + context.name()
                    + " is of kind GPU; this build of the pytorch backend runs libtorch on the CPU: use instance_group { kind: KIND_CPU }");
        }
        return TorchInstance.load(name, config, file, bindings, settings, engine);
    }

    @Override
    public void close() {
        // instances own their modules
    }
}
