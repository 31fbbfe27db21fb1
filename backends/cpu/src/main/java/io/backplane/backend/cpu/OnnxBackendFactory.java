package io.backplane.backend.cpu;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;
import java.util.Set;

/**
 * The cpu backend's factory: {@code backend: "cpu"} or {@code backend: "onnxruntime"} in
 * config.pbtxt, or Triton's {@code platform: "onnxruntime_onnx"}, so Triton ONNX repositories
 * load unchanged. Cheap to construct: ONNX Runtime's native library loads in {@link #create}.
 */
public final class OnnxBackendFactory implements BackendFactory {
    /** The backend's name. */
    public static final String NAME = "cpu";

    public OnnxBackendFactory() {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Set<String> aliases() {
        return Set.of("onnxruntime");
    }

    /**
     * Triton's ONNX platform and {@code model.onnx}; CPU; batches; not decoupled; an ONNX Runtime
     * session computes outputs from inputs alone (side-effect free: the built-in warm-up may run);
     * reads {@code optimization} (graph level, accelerators).
     */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().platforms("onnxruntime_onnx").modelFileNames("model.onnx").preferredInstanceKind(InstanceKind.CPU)
                .batching(true).decoupled(false).childRequests(false).sideEffectFreeExecute(true).configSections("optimization").build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) {
        return new OnnxBackend(context);
    }
}
