package ${package};

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;

/**
 * Backend-wide state: here only the context. {@link #loadModel} refuses what this backend does
 * not support (decoupled, batching, GPU) with {@link ErrorCode#UNSUPPORTED}, as the conformance
 * kit requires, and reads the model's {@code factor} parameter.
 */
final class ScaleBackend implements Backend {
    private final BackendContext context;

    ScaleBackend(BackendContext context) {
        this.context = context;
        if (!context.options().isEmpty()) {
            // --backend-config NAME,key=value reaches context.options(): refuse what you do not read
            throw BackplaneException.invalid("backend '" + context.backendName() + "' takes no backend options; got " + context.options().keySet());
        }
    }

    @Override
    public Model loadModel(ModelContext ctx) {
        ModelConfig config = ctx.config();
        if (config.decoupled()) {
            throw unsupported(ctx, "decoupled: true (it answers each request once)");
        }
        if (config.maxBatchSize() > 0) {
            throw unsupported(ctx, "max_batch_size " + config.maxBatchSize() + " (it does not batch; use 0)");
        }
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.GPU) {
                throw unsupported(ctx, "instance_group kind KIND_GPU (it runs on CPU)");
            }
        }
        String factor = config.parameters().getOrDefault("factor", "2");
        try {
            return new ScaleModel(Float.parseFloat(factor));
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid("model '" + ctx.name() + "': parameter factor is '" + factor + "'; use a number, e.g. 2");
        }
    }

    private BackplaneException unsupported(ModelContext ctx, String what) {
        return new BackplaneException(ErrorCode.UNSUPPORTED, "backend '" + context.backendName() + "' cannot serve model '" + ctx.name()
                + "': it does not support " + what);
    }

    @Override
    public void close() {
        // nothing backend-wide to release
    }
}
