package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A model's configuration: the checked content of its {@code config.pbtxt}. Immutable.
 *
 * @param name model name (the repository folder name)
 * @param platform Triton platform string, empty when none (e.g. {@code onnxruntime_onnx})
 * @param backend backend name, e.g. {@code python}
 * @param maxBatchSize largest batch along the first dimension; 0 means the model does not batch
 *     and its tensors have no batch dimension
 * @param inputs declared inputs
 * @param outputs declared outputs
 * @param instanceGroups instance groups; empty means one instance of kind AUTO
 * @param dynamicBatching dynamic batching settings, or null when the block is absent
 * @param versionPolicy which versions are served
 * @param decoupled whether responses are decoupled from requests (any number per request)
 * @param parameters free-form {@code parameters} (string values)
 * @param defaultModelFilename file name in the version folder, empty for the backend default
 */
public record ModelConfig(String name, String platform, String backend, int maxBatchSize, List<TensorConfig> inputs,
        List<TensorConfig> outputs, List<InstanceGroup> instanceGroups, @Nullable DynamicBatching dynamicBatching,
        VersionPolicy versionPolicy, boolean decoupled, Map<String, String> parameters, String defaultModelFilename) {

    /**
     * The {@code parameters} keys the host itself reads ({@code batcher}: the batcher's name;
     * {@code execute_timeout_ms}: the execute watchdog). A backend that rejects parameters it does
     * not know must accept these.
     */
    public static final java.util.Set<String> HOST_PARAMETERS = java.util.Set.of("batcher", "execute_timeout_ms");

    public ModelConfig {
        requireNonNull(name, "name is null");
        requireNonNull(platform, "platform is null");
        requireNonNull(backend, "backend is null");
        inputs = List.copyOf(inputs);
        outputs = List.copyOf(outputs);
        instanceGroups = List.copyOf(instanceGroups);
        requireNonNull(versionPolicy, "versionPolicy is null");
        parameters = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(parameters));
        requireNonNull(defaultModelFilename, "defaultModelFilename is null");
        if (maxBatchSize < 0) {
            throw new IllegalArgumentException("model '" + name + "': max_batch_size " + maxBatchSize + " is negative");
        }
    }

    public static Builder builder(String name) {
        return new Builder(name);
    }

    public Builder toBuilder() {
        Builder b = new Builder(name).platform(platform).backend(backend).maxBatchSize(maxBatchSize).dynamicBatching(dynamicBatching)
                .versionPolicy(versionPolicy).decoupled(decoupled).defaultModelFilename(defaultModelFilename);
        b.inputs.addAll(inputs);
        b.outputs.addAll(outputs);
        b.instanceGroups.addAll(instanceGroups);
        b.parameters.putAll(parameters);
        return b;
    }

    /** Whether requests carry a batch dimension ({@code max_batch_size > 0}). */
    public boolean batches() {
        return maxBatchSize > 0;
    }

    /** The declared input named {@code n}, or null. */
    public @Nullable TensorConfig input(String n) {
        return inputs.stream().filter(t -> t.name().equals(n)).findFirst().orElse(null);
    }

    /** The declared output named {@code n}, or null. */
    public @Nullable TensorConfig output(String n) {
        return outputs.stream().filter(t -> t.name().equals(n)).findFirst().orElse(null);
    }

    /** Total instances asked for, counting {@code count} once per listed GPU. */
    public int instanceCount() {
        if (instanceGroups.isEmpty()) {
            return 1;
        }
        int n = 0;
        for (InstanceGroup g : instanceGroups) {
            n += g.count() * Math.max(1, g.kind() == InstanceKind.GPU ? g.gpus().size() : 1);
        }
        return n;
    }

    /** Builds {@link ModelConfig}s; not thread-safe. */
    public static final class Builder {
        private final String name;
        private String platform = "";
        private String backend = "";
        private int maxBatchSize;
        private final List<TensorConfig> inputs = new ArrayList<>();
        private final List<TensorConfig> outputs = new ArrayList<>();
        private final List<InstanceGroup> instanceGroups = new ArrayList<>();
        private @Nullable DynamicBatching dynamicBatching;
        private VersionPolicy versionPolicy = VersionPolicy.DEFAULT;
        private boolean decoupled;
        private final Map<String, String> parameters = new LinkedHashMap<>();
        private String defaultModelFilename = "";

        private Builder(String name) {
            this.name = requireNonNull(name, "name is null");
        }

        public Builder platform(String v) {
            platform = v;
            return this;
        }

        public Builder backend(String v) {
            backend = v;
            return this;
        }

        public Builder maxBatchSize(int v) {
            maxBatchSize = v;
            return this;
        }

        public Builder input(TensorConfig t) {
            inputs.add(t);
            return this;
        }

        public Builder output(TensorConfig t) {
            outputs.add(t);
            return this;
        }

        public Builder clearInputs() {
            inputs.clear();
            return this;
        }

        public Builder clearOutputs() {
            outputs.clear();
            return this;
        }

        public Builder instanceGroup(InstanceGroup g) {
            instanceGroups.add(g);
            return this;
        }

        public Builder clearInstanceGroups() {
            instanceGroups.clear();
            return this;
        }

        public Builder dynamicBatching(@Nullable DynamicBatching v) {
            dynamicBatching = v;
            return this;
        }

        public Builder versionPolicy(VersionPolicy v) {
            versionPolicy = v;
            return this;
        }

        public Builder decoupled(boolean v) {
            decoupled = v;
            return this;
        }

        public Builder parameter(String key, String value) {
            parameters.put(key, value);
            return this;
        }

        public Builder defaultModelFilename(String v) {
            defaultModelFilename = v;
            return this;
        }

        public ModelConfig build() {
            return new ModelConfig(name, platform, backend, maxBatchSize, inputs, outputs, instanceGroups, dynamicBatching,
                    versionPolicy, decoupled, parameters, defaultModelFilename);
        }
    }
}
