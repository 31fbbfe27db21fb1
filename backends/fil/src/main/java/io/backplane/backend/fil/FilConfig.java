package io.backplane.backend.fil;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A fil model's parameters, read from {@code config.pbtxt} the way Triton's FIL backend reads
 * them (every value a string): {@code model_type} (default {@code xgboost}), {@code output_class}
 * or its newer name {@code is_classifier} (default false), {@code predict_proba} (default false)
 * and {@code threshold} (default 0.5); {@code cpu_nthread}, the threads one prediction may use
 * (default 0: the library's default, every core; the name FIL's CPU path uses). Performance parameters of FIL's GPU path
 * ({@code threads_per_tree}, {@code storage_type}, {@code algo}, {@code blocks_per_sm},
 * {@code transfer_threshold}, {@code use_experimental_optimizations}) change no output and are
 * accepted and ignored.
 *
 * @param modelType the model file's format
 * @param classifier whether the model is a classifier (outputs a class or class scores)
 * @param predictProba whether a classifier outputs a score per class instead of the class
 * @param threshold the positive-class threshold of a binary classifier without predict_proba
 * @param threads the threads one prediction may use, 0 for the library's default
 */
record FilConfig(ModelType modelType, boolean classifier, boolean predictProba, float threshold, int threads) {
    static FilConfig of(ModelConfig config) {
        Map<String, String> p = config.parameters();
        String model = config.name();
        ModelType type = ModelType.parse(p.getOrDefault("model_type", "xgboost"), model);
        Boolean outputClass = bool(p, "output_class", model);
        Boolean isClassifier = bool(p, "is_classifier", model);
        if (outputClass != null && isClassifier != null && !outputClass.equals(isClassifier)) {
            throw BackplaneException.invalid("model '" + model + "': parameters output_class (" + outputClass + ") and is_classifier ("
                    + isClassifier + ") disagree; they name the same setting, keep one");
        }
        boolean classifier = outputClass != null ? outputClass : isClassifier != null && isClassifier;
        Boolean proba = bool(p, "predict_proba", model);
        float threshold = 0.5f;
        String t = p.get("threshold");
        if (t != null) {
            try {
                threshold = Float.parseFloat(t.strip());
            } catch (NumberFormatException e) {
                throw BackplaneException.invalid("model '" + model + "': parameter threshold is '" + t + "', not a number; use e.g. 0.5");
            }
            if (!Float.isFinite(threshold)) {
                throw BackplaneException.invalid("model '" + model + "': parameter threshold is '" + t + "'; use a finite number, e.g. 0.5");
            }
        }
        if (p.containsKey("treeshap_output") || config.output("treeshap_output") != null) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + model
                    + "': the fil backend does not compute SHAP values (treeshap_output); remove that output");
        }
        int threads = 0;
        String n = p.get("cpu_nthread");
        if (n != null) {
            try {
                threads = Integer.parseInt(n.strip());
            } catch (NumberFormatException e) {
                threads = -2;
            }
            if (threads < -1) {
                throw BackplaneException.invalid("model '" + model + "': parameter cpu_nthread is '" + n + "'; use a number of threads per"
                        + " prediction, e.g. 1 (with several instances), or -1 for every core");
            }
            threads = Math.max(0, threads);
        }
        return new FilConfig(type, classifier, proba != null && proba, threshold, threads);
    }

    private static @Nullable Boolean bool(Map<String, String> p, String key, String model) {
        String v = p.get(key);
        if (v == null) {
            return null;
        }
        return switch (v.strip().toLowerCase(Locale.ROOT)) {
            case "true", "1" -> true;
            case "false", "0" -> false;
            default -> throw BackplaneException.invalid("model '" + model + "': parameter " + key + " is '" + v + "'; use \"true\" or \"false\"");
        };
    }

    /**
     * The width of one row of output__0 for a model whose library predicts {@code groups} values
     * per row (1: regression or binary; K: K classes), given the width the config declares
     * ({@code declared}, -1 when variable): Triton FIL's rule, a class index (width 1) for a
     * classifier without predict_proba, a score per class with it (a binary model: [1-p, p] when
     * output__0 declares 2, [p] when it declares 1), the prediction itself for a regressor.
     */
    int outputWidth(int groups, long declared) {
        if (!classifier || !predictProba) {
            return classifier ? 1 : groups;
        }
        if (groups == 1) {
            return declared == 1 ? 1 : 2;
        }
        return groups;
    }

    /**
     * FIL's post-processing of the library's predictions ({@code raw}: {@code rows × groups},
     * row-major) into output__0's rows of {@code width} values.
     */
    float[] postprocess(float[] raw, int rows, int groups, int width) {
        if (!classifier || (predictProba && width == groups)) {
            return raw;
        }
        float[] out = new float[rows * width];
        for (int r = 0; r < rows; r++) {
            if (predictProba) { // binary, two columns
                float pos = raw[r];
                out[r * 2] = 1f - pos;
                out[r * 2 + 1] = pos;
            } else if (groups == 1) {
                out[r] = raw[r] > threshold ? 1f : 0f;
            } else {
                int best = 0;
                for (int c = 1; c < groups; c++) {
                    if (raw[r * groups + c] > raw[r * groups + best]) {
                        best = c;
                    }
                }
                out[r] = best;
            }
        }
        return out;
    }
}
