package com.example.textops;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Backend-wide state of {@code textops}: nothing but the context. Models refuse what this
 * backend does not support (decoupled, batching, GPU) with {@link ErrorCode#UNSUPPORTED}, as the
 * conformance kit requires.
 */
final class TextOpsBackend implements Backend {
    private final BackendContext context;

    TextOpsBackend(BackendContext context) {
        this.context = context;
    }

    @Override
    public Model loadModel(ModelContext ctx) throws IOException {
        ModelConfig config = ctx.config();
        if (config.decoupled()) {
            throw unsupported(ctx, "decoupled: true (textops answers each request once)");
        }
        if (config.maxBatchSize() > 0) {
            throw unsupported(ctx, "max_batch_size " + config.maxBatchSize() + " (textops does not batch; use 0)");
        }
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.GPU) {
                throw unsupported(ctx, "instance_group kind KIND_GPU (textops runs on CPU)");
            }
        }
        TextOp op = TextOp.parse(config.parameters().getOrDefault("op", "upper"), ctx.name());
        Path prefixFile = ctx.versionDirectory().resolve("prefix.txt");
        String prefix = Files.isRegularFile(prefixFile) ? Files.readString(prefixFile, StandardCharsets.UTF_8).strip() : "";
        return new TextOpsModel(op, prefix);
    }

    private BackplaneException unsupported(ModelContext ctx, String what) {
        return new BackplaneException(ErrorCode.UNSUPPORTED, "backend '" + context.backendName() + "' cannot serve model '" + ctx.name()
                + "': it does not support " + what);
    }

    @Override
    public void close() {
        // nothing backend-wide to release
    }

    private record TextOpsModel(TextOp op, String prefix) implements Model {
        @Override
        public ModelInstance createInstance(InstanceContext context) {
            return new TextOpsInstance(op, prefix);
        }

        @Override
        public void close() {
            // instances own nothing shared
        }
    }
}
