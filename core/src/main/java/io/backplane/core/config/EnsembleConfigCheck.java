package io.backplane.core.config;

import static io.backplane.core.config.ModelConfigValidator.error;

import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.ModelConfig;

/**
 * The checks of an ensemble's config that need no other model: {@code platform: "ensemble"} and
 * {@code ensemble_scheduling} go together, each step is well formed, and the fields a scheduler
 * the core owns cannot honour are absent. The graph (composing models, tensor names, types,
 * shapes, cycles) is checked when the ensemble loads, against the composing models' configs.
 */
final class EnsembleConfigCheck {
    private EnsembleConfigCheck() {
    }

    static void check(ModelConfig c, SourcePositions at) {
        boolean ensemble = EnsembleScheduling.isEnsemble(c);
        boolean hasSection = c.raw().has(EnsembleScheduling.SECTION);
        if (!ensemble) {
            if (hasSection) {
                throw error(at.at(EnsembleScheduling.SECTION), EnsembleScheduling.SECTION, "model '" + c.name() + "' has ensemble_scheduling but its"
                        + " platform is '" + c.platform() + "'; an ensemble needs platform: \"ensemble\" (and no backend)");
            }
            return;
        }
        if (!hasSection) {
            throw error(at.at("platform"), "platform", "model '" + c.name() + "' has platform \"ensemble\" but no ensemble_scheduling;"
                    + " add ensemble_scheduling { step [ { model_name: \"...\" input_map { key: \"...\" value: \"...\" } ... } ] }");
        }
        if (!c.backend().isEmpty()) {
            throw error(at.at("backend"), "backend", "ensemble '" + c.name() + "' names backend '" + c.backend()
                    + "'; an ensemble is scheduled by the core and has no backend: remove the backend line");
        }
        if (c.raw().has("instance_group")) {
            throw error(at.at("instance_group"), "instance_group", "ensemble '" + c.name() + "' has instance_group; an ensemble has no"
                    + " instances (the core schedules it, its composing models run it): remove instance_group");
        }
        if (c.dynamicBatching() != null) {
            throw error(at.at("dynamic_batching"), "dynamic_batching", "ensemble '" + c.name() + "' has dynamic_batching; an ensemble does not"
                    + " batch itself, its composing models do: move dynamic_batching to the composing models' configs");
        }
        EnsembleScheduling es;
        try {
            es = EnsembleScheduling.of(c).orElseThrow();
        } catch (IllegalArgumentException e) {
            throw error(at.at(EnsembleScheduling.SECTION), EnsembleScheduling.SECTION, e.getMessage());
        }
        if (es.steps().isEmpty()) {
            throw error(at.at(EnsembleScheduling.SECTION), EnsembleScheduling.SECTION, "ensemble '" + c.name()
                    + "' has no step; add at least one step naming a composing model");
        }
        for (EnsembleScheduling.Step s : es.steps()) {
            if (s.modelName().equals(c.name())) {
                throw error(at.at(EnsembleScheduling.SECTION), EnsembleScheduling.SECTION, "ensemble '" + c.name() + "' " + s.describe()
                        + " names the ensemble itself; a step must name another model");
            }
            if (s.modelVersion() < -1) {
                throw error(at.at(EnsembleScheduling.SECTION), EnsembleScheduling.SECTION, "ensemble '" + c.name() + "' " + s.describe()
                        + ": model_version " + s.modelVersion() + " is invalid; use -1 for the latest version or a version number");
            }
        }
    }
}
