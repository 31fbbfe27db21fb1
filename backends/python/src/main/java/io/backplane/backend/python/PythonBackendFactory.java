package io.backplane.backend.python;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.DataType;
import io.backplane.spi.WarmupModel;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/** The {@code python} backend: Triton python_backend models in supervised stub processes. */
public final class PythonBackendFactory implements BackendFactory {
    @Override
    public String name() {
        return "python";
    }

    /**
     * {@code model.py}; CPU (each instance is a stub process); batches; decoupled models allowed;
     * user code, so execute is not declared free of side effects (no built-in warm-up unless a
     * model's config asks for it); the backend's own identity model warms the path every Python model
     * shares ({@link #WARMUP}).
     */
    @Override
    public BackendCapabilities capabilities() {
        BackendCapabilities.Builder b = BackendCapabilities.builder().modelFileNames("model.py").preferredInstanceKind(InstanceKind.CPU).batching(true)
                .decoupled(true);
        if (WARMUP != null) {
            b.warmupModel(WARMUP);
        }
        return b.build();
    }

    /** The backend's own warm-up model: an identity model.py over 16 floats, batching as most Triton models do. */
    private static final @Nullable WarmupModel WARMUP = warmupModel();

    private static @Nullable WarmupModel warmupModel() {
        try (InputStream in = PythonBackendFactory.class.getResourceAsStream("warmup/model.py")) {
            if (in == null) {
                return null;
            }
            ModelConfig config = ModelConfig.builder("warmup").backend("python").maxBatchSize(8)
                    .input(TensorConfig.of("IN", DataType.FP32, 16)).output(TensorConfig.of("OUT", DataType.FP32, 16))
                    .dynamicBatching(DynamicBatching.builder().build())
                    .instanceGroup(InstanceGroup.of("warmup", 1, InstanceKind.CPU, List.of())).build();
            return new WarmupModel(config, Map.of("model.py", in.readAllBytes()));
        } catch (IOException e) {
            return null; // capabilities must not fail: the backend then warms nothing of its own
        }
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) throws Exception {
        return PythonBackend.create(context);
    }
}
