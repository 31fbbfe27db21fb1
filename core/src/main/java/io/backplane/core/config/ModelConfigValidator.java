package io.backplane.core.config;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.config.VersionPolicy;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Semantic checks of a {@link ModelConfig}, after parsing and again after a backend auto-completed
 * it. Each failure is an INVALID_ARGUMENT naming the file (with line and column when the config came
 * from text), the field, the bad value and what to do. Rules follow Triton's model_config_utils
 * where Backplane supports the feature.
 */
public final class ModelConfigValidator {
    private ModelConfigValidator() {
    }

    /**
     * Checks {@code c}; {@code sourceName} (usually the config file path) is named in every error.
     *
     * @throws BackplaneException INVALID_ARGUMENT on the first rule {@code c} breaks
     */
    public static void validate(ModelConfig c, String sourceName) {
        validate(c, SourcePositions.fileOnly(sourceName));
    }

    /** As {@link #validate(ModelConfig, String)}, naming line and column where {@code at} knows them. */
    public static void validate(ModelConfig c, SourcePositions at) {
        if (c.name().isEmpty()) {
            throw error(at.at("name"), "name", "the model name is empty; set name: \"<model directory name>\"");
        }
        checkBackend(c, at);
        EnsembleConfigCheck.check(c, at);
        checkTensors("input", c.inputs(), at);
        checkTensors("output", c.outputs(), at);
        DynamicBatching db = c.dynamicBatching();
        if (db != null) {
            checkDynamicBatching(c, db, at);
        }
        checkInstanceGroups(c.instanceGroups(), at);
        SequenceBatchingConfig.validate(c, at);
        if (c.versionPolicy() instanceof VersionPolicy.Specific s) {
            for (int i = 0; i < s.versions().size(); i++) {
                long v = s.versions().get(i);
                if (v < 0) {
                    throw error(at.at("version_policy.specific.versions[" + i + "]"), "version_policy.specific.versions",
                            "version " + v + " is negative; versions are the names of numeric version folders");
                }
            }
        }
        String file = c.defaultModelFilename();
        if (file.contains("/") || file.contains("\\") || file.equals("..") || file.equals(".")) {
            throw error(at.at("default_model_filename"), "default_model_filename",
                    "'" + file + "' is not a plain file name; give the name of a file inside the version folder");
        }
    }

    private static void checkBackend(ModelConfig c, SourcePositions at) {
        String platform = c.platform();
        String backend = c.backend();
        if (backend.isEmpty() && platform.isEmpty()) {
            throw error(at.source(), "backend", "model '" + c.name() + "' names neither a backend nor a platform; add e.g. backend: \"python\" or "
                    + "platform: \"onnxruntime_onnx\"");
        }
        // Which backend serves a platform is what the installed backends declare (BackendCapabilities): the
        // parser resolves it, and a platform nobody serves fails the load naming the installed backends.
    }

    private static void checkTensors(String kind, List<TensorConfig> tensors, SourcePositions at) {
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < tensors.size(); i++) {
            TensorConfig t = tensors.get(i);
            String path = kind + "[" + i + "]";
            if (!seen.add(t.name())) {
                throw error(at.at(path + ".name"), kind + ".name", kind + " '" + t.name() + "' is declared twice; tensor names must be unique");
            }
            List<Long> reshape = t.reshape();
            if (t.dims().isEmpty() && reshape == null) {
                throw error(at.at(path), kind + ".dims", kind + " '" + t.name() + "' has no dims; give its shape without the batch dimension, "
                        + "e.g. dims: [ 4 ], or dims: [ 1 ] reshape: { shape: [ ] } for a scalar");
            }
            for (int d = 0; d < t.dims().size(); d++) {
                long v = t.dims().get(d);
                if (v == 0 || v < -1) {
                    throw error(at.at(path + ".dims[" + d + "]"), kind + ".dims", kind + " '" + t.name() + "': dimension " + v
                            + " is invalid; use an integer ≥ 1, or -1 for a variable-size dimension");
                }
            }
            if (reshape != null) {
                for (long v : reshape) {
                    if (v == 0 || v < -1) {
                        throw error(at.at(path + ".reshape"), kind + ".reshape.shape", kind + " '" + t.name() + "': reshape dimension " + v
                                + " is invalid; use an integer ≥ 1, or -1 for a variable-size dimension");
                    }
                }
                boolean variable = t.dims().contains(-1L) || reshape.contains(-1L);
                if (!variable && elements(t.dims()) != elements(reshape)) {
                    throw error(at.at(path + ".reshape"), kind + ".reshape.shape", kind + " '" + t.name() + "': reshape " + reshape + " has "
                            + elements(reshape) + " elements but dims " + t.dims() + " has " + elements(t.dims())
                            + "; both shapes must hold the same number of elements");
                }
            }
        }
    }

    private static long elements(List<Long> shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    private static void checkDynamicBatching(ModelConfig c, DynamicBatching db, SourcePositions at) {
        if (c.maxBatchSize() == 0) {
            throw error(at.at("dynamic_batching"), "dynamic_batching", "dynamic_batching needs max_batch_size > 0 but max_batch_size is 0; "
                    + "set max_batch_size or remove dynamic_batching");
        }
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < db.preferredBatchSizes().size(); i++) {
            int p = db.preferredBatchSizes().get(i);
            String where = at.at("dynamic_batching.preferred_batch_size[" + i + "]");
            if (p > c.maxBatchSize()) {
                throw error(where, "dynamic_batching.preferred_batch_size", "preferred batch size " + p + " exceeds max_batch_size "
                        + c.maxBatchSize() + "; lower it or raise max_batch_size");
            }
            if (!seen.add(p)) {
                throw error(where, "dynamic_batching.preferred_batch_size", "preferred batch size " + p + " is listed twice; list each once");
            }
        }
        if (db.priorityLevels() == 0) {
            if (db.defaultPriorityLevel() != 0) {
                throw error(at.at("dynamic_batching.default_priority_level"), "dynamic_batching.default_priority_level",
                        "default_priority_level " + db.defaultPriorityLevel() + " is set but priority_levels is 0; set priority_levels");
            }
            if (!db.priorityQueuePolicy().isEmpty()) {
                throw error(at.at("dynamic_batching.priority_queue_policy"), "dynamic_batching.priority_queue_policy",
                        "priority_queue_policy names levels " + db.priorityQueuePolicy().keySet() + " but priority_levels is 0; set priority_levels");
            }
        }
    }

    private static void checkInstanceGroups(List<InstanceGroup> groups, SourcePositions at) {
        Set<String> names = new HashSet<>();
        for (int i = 0; i < groups.size(); i++) {
            InstanceGroup g = groups.get(i);
            String path = "instance_group[" + i + "]";
            if (!g.name().isEmpty() && !names.add(g.name())) {
                throw error(at.at(path + ".name"), "instance_group.name", "instance group name '" + g.name() + "' is used twice; names must be unique");
            }
            // Triton accepts gpus with KIND_AUTO too (it then means GPU when those devices exist).
            if (!g.gpus().isEmpty() && g.kind() != InstanceKind.GPU && g.kind() != InstanceKind.AUTO) {
                throw error(at.at(path + ".gpus"), "instance_group.gpus", "instance group '" + g.name() + "' of kind KIND_" + g.kind()
                        + " lists gpus " + g.gpus() + "; gpus are only valid with kind: KIND_GPU");
            }
            for (int gpu : g.gpus()) {
                if (gpu < 0) {
                    throw error(at.at(path + ".gpus"), "instance_group.gpus", "instance group '" + g.name() + "': gpu id " + gpu
                            + " is negative; use device ordinals ≥ 0");
                }
            }
        }
    }

    static BackplaneException error(String where, String field, String problem) {
        return BackplaneException.invalid(where + ": field '" + field + "': " + problem);
    }
}
