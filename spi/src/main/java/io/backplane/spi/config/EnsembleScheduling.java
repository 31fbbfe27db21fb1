package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Triton's {@code ensemble_scheduling} section of a model whose {@code platform} is
 * {@value #PLATFORM}: the steps of the pipeline, each naming a composing model and how its
 * inputs and outputs connect to the ensemble's tensors. The core schedules ensembles itself; no
 * backend serves them. Immutable and thread-safe.
 *
 * <p>Read from the parsed config with {@link #of(ModelConfig)}; the host's parser has already
 * checked the section against Triton's schema, and the host checks the graph when it loads the
 * ensemble.
 */
public final class EnsembleScheduling {
    /** The Triton platform of an ensemble. */
    public static final String PLATFORM = "ensemble";
    /** The config section name. */
    public static final String SECTION = "ensemble_scheduling";

    private static final Set<String> STEP_FIELDS = Set.of("model_name", "model_version", "input_map", "output_map");

    private final List<Step> steps;

    private EnsembleScheduling(List<Step> steps) {
        this.steps = List.copyOf(steps);
    }

    /** The steps in config order; never null. */
    public List<Step> steps() {
        return steps;
    }

    /** Whether {@code config} is an ensemble (its platform is {@value #PLATFORM}). */
    public static boolean isEnsemble(ModelConfig config) {
        return PLATFORM.equals(config.platform());
    }

    /**
     * The ensemble section of {@code config}, or empty when it has none.
     *
     * @throws IllegalArgumentException when the section holds a field outside Triton's
     *     {@code ModelEnsembling} or a step lacks its model name, naming the step
     */
    public static Optional<EnsembleScheduling> of(ModelConfig config) {
        return config.section(SECTION).map(EnsembleScheduling::read);
    }

    /** Reads one {@code ensemble_scheduling} message of the raw config tree. */
    public static EnsembleScheduling read(ConfigNode section) {
        requireNonNull(section, "section is null");
        for (String f : section.fieldNames()) {
            if (!f.equals("step")) {
                throw new IllegalArgumentException("ensemble_scheduling has field '" + f + "'; it takes only step [ ... ]");
            }
        }
        List<Step> steps = new ArrayList<>();
        List<ConfigNode> nodes = section.sections("step");
        for (int i = 0; i < nodes.size(); i++) {
            ConfigNode n = nodes.get(i);
            String namespace = n.value("model_namespace").orElse("");
            if (!namespace.isEmpty()) {
                throw new IllegalArgumentException("ensemble_scheduling step " + i + " has model_namespace '" + namespace
                        + "'; model namespacing is not supported: remove it and give the models unique names");
            }
            for (String f : n.fieldNames()) {
                if (!STEP_FIELDS.contains(f) && !f.equals("model_namespace")) {
                    throw new IllegalArgumentException("ensemble_scheduling step " + i + " has field '" + f + "'; a step takes " + STEP_FIELDS);
                }
            }
            String model = n.value("model_name").orElse("");
            if (model.isEmpty()) {
                throw new IllegalArgumentException("ensemble_scheduling step " + i + " has no model_name; name the composing model");
            }
            long version;
            try {
                version = Long.parseLong(n.value("model_version").orElse("-1").trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("ensemble_scheduling step " + i + " (model '" + model + "'): model_version '"
                        + n.value("model_version").orElse("") + "' is not a number; use -1 for the latest version");
            }
            steps.add(new Step(i, model, version, map(n, "input_map", i, model), map(n, "output_map", i, model)));
        }
        return new EnsembleScheduling(steps);
    }

    private static Map<String, String> map(ConfigNode step, String field, int index, String model) {
        Map<String, String> out = new LinkedHashMap<>();
        for (ConfigNode e : step.sections(field)) {
            String key = e.value("key").orElse("");
            String value = e.value("value").orElse("");
            if (key.isEmpty() || value.isEmpty()) {
                throw new IllegalArgumentException("ensemble_scheduling step " + index + " (model '" + model + "'): an entry of " + field
                        + " needs both key and value, e.g. " + field + " { key: \"INPUT0\" value: \"tensor_name\" }");
            }
            if (out.put(key, value) != null) {
                throw new IllegalArgumentException("ensemble_scheduling step " + index + " (model '" + model + "'): " + field + " maps '"
                        + key + "' twice");
            }
        }
        return out;
    }

    @Override
    public String toString() {
        return "EnsembleScheduling" + steps;
    }

    /** One step: a composing model and its tensor maps. Immutable. */
    public static final class Step {
        private final int index;
        private final String modelName;
        private final long modelVersion;
        private final Map<String, String> inputMap;
        private final Map<String, String> outputMap;

        Step(int index, String modelName, long modelVersion, Map<String, String> inputMap, Map<String, String> outputMap) {
            this.index = index;
            this.modelName = requireNonNull(modelName, "modelName is null");
            this.modelVersion = modelVersion;
            this.inputMap = Collections.unmodifiableMap(new LinkedHashMap<>(inputMap));
            this.outputMap = Collections.unmodifiableMap(new LinkedHashMap<>(outputMap));
        }

        /** The step's place in the config, from 0. */
        public int index() {
            return index;
        }

        public String modelName() {
            return modelName;
        }

        /** The composing model's version; -1 for the latest. */
        public long modelVersion() {
            return modelVersion;
        }

        /** Composing model input name → ensemble tensor name, in config order. */
        public Map<String, String> inputMap() {
            return inputMap;
        }

        /** Composing model output name → ensemble tensor name, in config order. */
        public Map<String, String> outputMap() {
            return outputMap;
        }

        /** "step 1 (model 'add_sub')", as errors name a step. */
        public String describe() {
            return "step " + index + " (model '" + modelName + "')";
        }

        @Override
        public String toString() {
            return describe() + " in " + inputMap + " out " + outputMap;
        }
    }
}
