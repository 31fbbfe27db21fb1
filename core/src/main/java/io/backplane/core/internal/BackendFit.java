package io.backplane.core.internal;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Holds a model's (auto-completed) config against what its backend declared in
 * {@link BackendCapabilities}, before the backend loads it, and places {@code KIND_AUTO}
 * instances: on a GPU when the backend prefers GPUs and reports a device, else on the CPU.
 */
final class BackendFit {
    private static final Logger log = LoggerFactory.getLogger(BackendFit.class);

    private BackendFit() {
    }

    /**
     * The config to load: {@code c}, with AUTO groups (or the implicit group of a config without
     * {@code instance_group}) turned into GPU groups where the backend prefers and has a GPU.
     *
     * @throws BackplaneException UNSUPPORTED for batching or a decoupled model the backend does not serve
     */
    static ModelConfig apply(ModelConfig c, String backendName, BackendCapabilities caps, Backend backend) {
        if (c.maxBatchSize() > 0 && !caps.batching()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + c.name() + "': max_batch_size is " + c.maxBatchSize() + " but backend '"
                    + backendName + "' does not execute batches; set max_batch_size: 0");
        }
        if (c.decoupled() && !caps.decoupled()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + c.name() + "' is decoupled, but backend '" + backendName
                    + "' answers each request with exactly one response; remove model_transaction_policy { decoupled: true }");
        }
        boolean auto = c.instanceGroups().isEmpty() || c.instanceGroups().stream().anyMatch(g -> g.kind() == InstanceKind.AUTO);
        if (!auto || caps.preferredInstanceKind() != InstanceKind.GPU) {
            return c; // AUTO stays, and instances start on the CPU
        }
        int devices;
        try {
            devices = backend.deviceCount();
        } catch (RuntimeException e) {
            log.warn("backend '{}' failed to report its devices; KIND_AUTO instances of model '{}' go to the CPU", backendName, c.name(), e);
            devices = 0;
        }
        if (devices <= 0) {
            log.info("model '{}': backend '{}' prefers GPUs but reports none; KIND_AUTO instances run on the CPU", c.name(), backendName);
            return c;
        }
        ModelConfig.Builder b = c.toBuilder();
        if (c.instanceGroups().isEmpty()) {
            b.instanceGroup(InstanceGroup.of(c.name() + "_0", 1, InstanceKind.GPU, List.of()));
        } else {
            b.instanceGroups(c.instanceGroups().stream()
                    .map(g -> g.kind() == InstanceKind.AUTO ? g.toBuilder().kind(InstanceKind.GPU).build() : g).toList());
        }
        return b.build();
    }
}
