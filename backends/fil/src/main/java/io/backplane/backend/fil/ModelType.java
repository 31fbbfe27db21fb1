package io.backplane.backend.fil;

import io.backplane.spi.BackplaneException;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** FIL's {@code model_type} values this backend serves, each with Triton's default file name. */
enum ModelType {
    /** XGBoost's legacy binary format. */
    XGBOOST("xgboost", "xgboost.model"),
    XGBOOST_JSON("xgboost_json", "xgboost.json"),
    XGBOOST_UBJ("xgboost_ubj", "xgboost.ubj"),
    /** LightGBM's text format. */
    LIGHTGBM("lightgbm", "model.txt");

    final String value;
    final String defaultFile;

    ModelType(String value, String defaultFile) {
        this.value = value;
        this.defaultFile = defaultFile;
    }

    boolean isXgboost() {
        return this != LIGHTGBM;
    }

    static ModelType parse(String value, String model) {
        String v = value.strip().toLowerCase(Locale.ROOT);
        for (ModelType t : values()) {
            if (t.value.equals(v)) {
                return t;
            }
        }
        String known = Arrays.stream(values()).map(t -> t.value).collect(Collectors.joining(", "));
        String hint = v.equals("treelite_checkpoint")
                ? " (Treelite checkpoints are not supported: save the model from XGBoost or LightGBM instead)" : "";
        throw BackplaneException.invalid("model '" + model + "': parameter model_type is '" + value + "'" + hint + "; use one of " + known);
    }
}
