package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.Experimental;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * A model's configuration: the checked content of its {@code config.pbtxt}. Immutable and
 * thread-safe; every list and map it returns is unmodifiable.
 *
 * <p>Build one with {@link #builder(String)}, change one with {@link #toBuilder()}. There is no
 * public constructor: Triton's configuration keeps growing (sequence batching, ensembles,
 * warm-up, cache), and fields added here later must not break compiled plugins.
 *
 * <p>Sections the core does not model are still readable through {@link #raw()} and
 * {@link #section(String)}.
 */
public final class ModelConfig {
    /**
     * The {@code parameters} keys the host itself reads ({@code batcher}: the batcher's name;
     * {@code execute_timeout_ms}: the execute watchdog; {@code autoscale_*}: the autoscaling policy
     * that changes the instance count while the model serves, see docs/model-repository.md). A
     * backend that rejects parameters it does not know must accept these.
     */
    public static final Set<String> HOST_PARAMETERS = Set.of("batcher", "execute_timeout_ms", "autoscale_min_instances", "autoscale_max_instances",
            "autoscale_queue_depth", "autoscale_queue_delay_us", "autoscale_idle_ms", "autoscale_interval_ms");

    private final String name;
    private final String platform;
    private final String backend;
    private final int maxBatchSize;
    private final List<TensorConfig> inputs;
    private final List<TensorConfig> outputs;
    private final List<InstanceGroup> instanceGroups;
    private final @Nullable DynamicBatching dynamicBatching;
    private final @Nullable SequenceBatching sequenceBatching;
    private final VersionPolicy versionPolicy;
    private final boolean decoupled;
    private final Map<String, String> parameters;
    private final String defaultModelFilename;
    private final ConfigNode raw;

    private ModelConfig(Builder b) {
        this.name = requireNonNull(b.name, "name is null");
        this.platform = requireNonNull(b.platform, "platform is null");
        this.backend = requireNonNull(b.backend, "backend is null");
        this.maxBatchSize = b.maxBatchSize;
        this.inputs = List.copyOf(b.inputs);
        this.outputs = List.copyOf(b.outputs);
        this.instanceGroups = List.copyOf(b.instanceGroups);
        this.dynamicBatching = b.dynamicBatching;
        this.sequenceBatching = b.sequenceBatching;
        this.versionPolicy = requireNonNull(b.versionPolicy, "versionPolicy is null");
        this.decoupled = b.decoupled;
        this.parameters = Collections.unmodifiableMap(new LinkedHashMap<>(b.parameters));
        this.defaultModelFilename = requireNonNull(b.defaultModelFilename, "defaultModelFilename is null");
        this.raw = requireNonNull(b.raw, "raw is null");
        if (maxBatchSize < 0) {
            throw new IllegalArgumentException("model '" + name + "': max_batch_size " + maxBatchSize + " is negative");
        }
    }

    /** A builder for a model named {@code name}; every other field starts at Triton's default. */
    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** A builder holding this config's values, including {@link #raw()}. */
    public Builder toBuilder() {
        Builder b = new Builder(name).platform(platform).backend(backend).maxBatchSize(maxBatchSize).dynamicBatching(dynamicBatching)
                .versionPolicy(versionPolicy).decoupled(decoupled).defaultModelFilename(defaultModelFilename).raw(raw);
        b.sequenceBatching(sequenceBatching);
        b.inputs.addAll(inputs);
        b.outputs.addAll(outputs);
        b.instanceGroups.addAll(instanceGroups);
        b.parameters.putAll(parameters);
        return b;
    }

    /** Model name (the repository folder name). */
    public String name() {
        return name;
    }

    /** Triton platform string, empty when none (e.g. {@code onnxruntime_onnx}). */
    public String platform() {
        return platform;
    }

    /** Backend name, e.g. {@code python}; empty when only the platform names it. */
    public String backend() {
        return backend;
    }

    /**
     * Largest batch along the first dimension; 0 means the model does not batch and its tensors
     * have no batch dimension.
     */
    public int maxBatchSize() {
        return maxBatchSize;
    }

    /** Declared inputs. */
    public List<TensorConfig> inputs() {
        return inputs;
    }

    /** Declared outputs. */
    public List<TensorConfig> outputs() {
        return outputs;
    }

    /** Instance groups; empty means one instance of kind AUTO. */
    public List<InstanceGroup> instanceGroups() {
        return instanceGroups;
    }

    /** Dynamic batching settings, or null when the block is absent. */
    public @Nullable DynamicBatching dynamicBatching() {
        return dynamicBatching;
    }

    /** Which versions are served. */
    public VersionPolicy versionPolicy() {
        return versionPolicy;
    }

    /** The {@code sequence_batching} block, or null: a stateful model whose requests belong to sequences. */
    public @Nullable SequenceBatching sequenceBatching() {
        return sequenceBatching;
    }

    /** Whether responses are decoupled from requests (any number per request). */
    public boolean decoupled() {
        return decoupled;
    }

    /** Free-form {@code parameters} (string values), in file order. */
    public Map<String, String> parameters() {
        return parameters;
    }

    /** File name in the version folder, empty for the backend default. */
    public String defaultModelFilename() {
        return defaultModelFilename;
    }

    /**
     * The whole {@code config.pbtxt} as the host parsed it, as a read-only tree; {@link ConfigNode#EMPTY}
     * for a config built in code. It holds what the file says, before auto-complete: the typed
     * accessors are the checked, completed values and win where both exist.
     */
    @Experimental
    public ConfigNode raw() {
        return raw;
    }

    /** The top-level section {@code field} of {@link #raw()} (e.g. {@code "optimization"}), or empty. */
    @Experimental
    public Optional<ConfigNode> section(String field) {
        return raw.section(field);
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

    @Override
    public boolean equals(Object o) {
        return o instanceof ModelConfig c && name.equals(c.name) && platform.equals(c.platform) && backend.equals(c.backend)
                && maxBatchSize == c.maxBatchSize && inputs.equals(c.inputs) && outputs.equals(c.outputs) && instanceGroups.equals(c.instanceGroups)
                && Objects.equals(dynamicBatching, c.dynamicBatching) && Objects.equals(sequenceBatching, c.sequenceBatching) && versionPolicy.equals(c.versionPolicy) && decoupled == c.decoupled
                && parameters.equals(c.parameters) && defaultModelFilename.equals(c.defaultModelFilename) && raw.equals(c.raw);
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, platform, backend, maxBatchSize, inputs, outputs, instanceGroups, dynamicBatching, versionPolicy, decoupled,
                parameters, defaultModelFilename, raw);
    }

    /** The typed fields (not {@link #raw()}), for logs and test failures. */
    @Override
    public String toString() {
        return "ModelConfig[name=" + name + ", platform=" + platform + ", backend=" + backend + ", maxBatchSize=" + maxBatchSize + ", inputs="
                + inputs + ", outputs=" + outputs + ", instanceGroups=" + instanceGroups + ", dynamicBatching=" + dynamicBatching
                + ", versionPolicy=" + versionPolicy + ", decoupled=" + decoupled + ", parameters=" + parameters + ", defaultModelFilename="
                + defaultModelFilename + "]";
    }

    /** Builds {@link ModelConfig}s; not thread-safe. */
    public static final class Builder {
        private String name;
        private String platform = "";
        private String backend = "";
        private int maxBatchSize;
        private final List<TensorConfig> inputs = new ArrayList<>();
        private final List<TensorConfig> outputs = new ArrayList<>();
        private final List<InstanceGroup> instanceGroups = new ArrayList<>();
        private @Nullable DynamicBatching dynamicBatching;
        private @Nullable SequenceBatching sequenceBatching;
        private VersionPolicy versionPolicy = VersionPolicy.DEFAULT;
        private boolean decoupled;
        private final Map<String, String> parameters = new LinkedHashMap<>();
        private String defaultModelFilename = "";
        private ConfigNode raw = ConfigNode.EMPTY;

        private Builder(String name) {
            this.name = requireNonNull(name, "name is null");
        }

        /** Renames the model. */
        public Builder name(String v) {
            name = requireNonNull(v, "name is null");
            return this;
        }

        /** Sets {@link ModelConfig#platform()}. */
        public Builder platform(String v) {
            platform = requireNonNull(v, "platform is null");
            return this;
        }

        /** Sets {@link ModelConfig#backend()}. */
        public Builder backend(String v) {
            backend = requireNonNull(v, "backend is null");
            return this;
        }

        /** Sets {@link ModelConfig#maxBatchSize()}. */
        public Builder maxBatchSize(int v) {
            maxBatchSize = v;
            return this;
        }

        /** Appends an input. */
        public Builder input(TensorConfig t) {
            inputs.add(requireNonNull(t, "input is null"));
            return this;
        }

        /** Appends an output. */
        public Builder output(TensorConfig t) {
            outputs.add(requireNonNull(t, "output is null"));
            return this;
        }

        /** Replaces the inputs. */
        public Builder inputs(List<TensorConfig> v) {
            inputs.clear();
            v.forEach(this::input);
            return this;
        }

        /** Replaces the outputs. */
        public Builder outputs(List<TensorConfig> v) {
            outputs.clear();
            v.forEach(this::output);
            return this;
        }

        /** Removes every input added so far. */
        public Builder clearInputs() {
            inputs.clear();
            return this;
        }

        /** Removes every output added so far. */
        public Builder clearOutputs() {
            outputs.clear();
            return this;
        }

        /** Appends an instance group. */
        public Builder instanceGroup(InstanceGroup g) {
            instanceGroups.add(requireNonNull(g, "instance group is null"));
            return this;
        }

        /** Replaces the instance groups. */
        public Builder instanceGroups(List<InstanceGroup> v) {
            instanceGroups.clear();
            v.forEach(this::instanceGroup);
            return this;
        }

        /** Removes every instance group added so far. */
        public Builder clearInstanceGroups() {
            instanceGroups.clear();
            return this;
        }

        /** Sets {@link ModelConfig#dynamicBatching()}. */
        public Builder dynamicBatching(@Nullable DynamicBatching v) {
            dynamicBatching = v;
            return this;
        }

        /** Sets {@link ModelConfig#versionPolicy()}. */
        public Builder versionPolicy(VersionPolicy v) {
            versionPolicy = requireNonNull(v, "versionPolicy is null");
            return this;
        }

        /** Sets {@link ModelConfig#sequenceBatching()}. */
        public Builder sequenceBatching(@Nullable SequenceBatching v) {
            sequenceBatching = v;
            return this;
        }

        /** Sets {@link ModelConfig#decoupled()}. */
        public Builder decoupled(boolean v) {
            decoupled = v;
            return this;
        }

        /** Sets one parameter. */
        public Builder parameter(String key, String value) {
            parameters.put(requireNonNull(key, "key is null"), requireNonNull(value, "value of parameter '" + key + "' is null"));
            return this;
        }

        /** Replaces the parameters. */
        public Builder parameters(Map<String, String> v) {
            parameters.clear();
            v.forEach(this::parameter);
            return this;
        }

        /** Sets {@link ModelConfig#defaultModelFilename()}. */
        public Builder defaultModelFilename(String v) {
            defaultModelFilename = requireNonNull(v, "defaultModelFilename is null");
            return this;
        }

        /** The raw view of the parsed file; set by the host's parser. */
        public Builder raw(ConfigNode v) {
            raw = requireNonNull(v, "raw is null");
            return this;
        }

        /**
         * The config.
         *
         * @throws IllegalArgumentException when max_batch_size is negative (named in the message)
         */
        public ModelConfig build() {
            return new ModelConfig(this);
        }
    }
}
