package ${package};

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Backend-wide state: here only the context. {@link #loadModel} refuses what this backend does
 * not support (decoupled, GPU) with {@link ErrorCode#UNSUPPORTED}, as the conformance kit
 * requires, a config it cannot serve with {@link ErrorCode#INVALID_ARGUMENT}, and reads the
 * model's {@code ${backendName}_factor} parameter.
 *
 * <p>Error codes at load: INVALID_ARGUMENT for anything wrong in the model's folder or config
 * (a missing or unreadable model file too), UNSUPPORTED for a feature this backend lacks. Never
 * NOT_FOUND: the load endpoint answers it with 404, which clients read as "no such model".
 */
final class ${backendClass}Backend implements Backend {
    /** The model parameter this backend reads (config.pbtxt: {@code parameters { key: "${backendName}_factor" ... }}). */
    static final String FACTOR = "${backendName}_factor";

    private static final Logger LOG = LoggerFactory.getLogger(${backendClass}Backend.class);

    private final BackendContext context;

    ${backendClass}Backend(BackendContext context) {
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
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.GPU) {
                throw unsupported(ctx, "instance_group kind KIND_GPU (it runs on CPU)");
            }
        }
        for (TensorConfig t : config.inputs()) {
            if (t.dataType() != DataType.FP32) {
                throw BackplaneException.invalid("model '" + ctx.name() + "': input '" + t.name() + "' is " + t.dataType()
                        + "; this backend multiplies FP32 tensors, declare it TYPE_FP32");
            }
        }
        String factor = config.parameters().getOrDefault(FACTOR, "2");
        float value;
        try {
            value = Float.parseFloat(factor);
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid("model '" + ctx.name() + "': parameter " + FACTOR + " is '" + factor + "'; use a number, e.g. 2");
        }
        // INFO lines of a plugin reach the server's log when its package is enabled:
        // backplane serve --log-level ${package}=INFO (see docs/writing-a-backend.md, "Logging")
        LOG.info("model '{}' v{}: {} = {}, max_batch_size {}", ctx.name(), ctx.version(), FACTOR, value, config.maxBatchSize());
        return new ${backendClass}Model(ctx.name(), config, value);
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
