package io.backplane.backend.fil;

import io.backplane.spi.BackplaneException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import ml.dmlc.xgboost4j.java.Booster;
import ml.dmlc.xgboost4j.java.XGBoost;
import ml.dmlc.xgboost4j.java.XGBoostError;

/**
 * An XGBoost model through xgboost4j. {@link #predict} calls {@code Booster.inplace_predict}
 * (XGBoost's {@code XGBoosterPredictFromDense}), which XGBoost documents as thread-safe since 1.4:
 * the instances of a model share one booster and predict concurrently. NaN marks a missing value,
 * as in FIL.
 */
final class XgboostEngine implements TreeEngine {
    private final Booster booster;
    private final int features;
    private final int groups;

    private XgboostEngine(Booster booster, int features, int groups) {
        this.booster = booster;
        this.features = features;
        this.groups = groups;
    }

    static XgboostEngine load(Path file, ModelType type, String model, int threads) throws XGBoostError {
        NativeLibraries.xgboost();
        ModelType found = formatOf(file);
        if (found != type) {
            throw BackplaneException.invalid("model '" + model + "': " + file.getFileName() + " is an XGBoost " + describe(found)
                    + " file but model_type is '" + type.value + "'; set model_type to '" + found.value + "' (XGBoost would otherwise read it"
                    + " by its content, whatever the config says)");
        }
        Booster b;
        try {
            b = XGBoost.loadModel(file.toString());
        } catch (XGBoostError e) {
            throw BackplaneException.invalid("model '" + model + "': XGBoost could not read " + file.getFileName() + " as model_type "
                    + type.value + " (" + firstLine(e.getMessage()) + "); check that the file is an XGBoost model saved in that format");
        }
        try {
            if (threads > 0) {
                b.setParam("nthread", Integer.toString(threads));
            }
            int features = Math.toIntExact(b.getNumFeature());
            float[] nan = new float[features];
            java.util.Arrays.fill(nan, Float.NaN);
            int groups = b.inplace_predict(nan, 1, features, Float.NaN)[0].length;
            return new XgboostEngine(b, features, groups);
        } catch (XGBoostError | RuntimeException e) {
            b.dispose();
            throw e;
        }
    }

    /**
     * The format of an XGBoost model file, from its first bytes: JSON text starts with an object
     * (whitespace, then a quote or a closing brace after its '{'); UBJSON also starts with '{' but a
     * type marker follows it; anything else is the legacy binary format.
     */
    static ModelType formatOf(Path file) throws java.io.UncheckedIOException {
        byte[] head = new byte[64];
        int n;
        try (java.io.InputStream in = java.nio.file.Files.newInputStream(file)) {
            n = in.readNBytes(head, 0, head.length);
        } catch (java.io.IOException e) {
            throw BackplaneException.invalid("cannot read model file " + file + ": " + e.getMessage());
        }
        int i = 0;
        while (i < n && Character.isWhitespace(head[i])) {
            i++;
        }
        if (i >= n || head[i] != '{') {
            return ModelType.XGBOOST;
        }
        int j = i + 1;
        while (j < n && Character.isWhitespace(head[j])) {
            j++;
        }
        if (j < n && (head[j] == '"' || head[j] == '}')) {
            return ModelType.XGBOOST_JSON;
        }
        return ModelType.XGBOOST_UBJ;
    }

    private static String describe(ModelType t) {
        return switch (t) {
            case XGBOOST_JSON -> "JSON";
            case XGBOOST_UBJ -> "UBJSON";
            default -> "legacy binary";
        };
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "no message";
        }
        String[] lines = s.strip().split("\n");
        return lines[lines.length - 1].strip();
    }

    @Override
    public int features() {
        return features;
    }

    @Override
    public int groups() {
        return groups;
    }

    @Override
    public float[] predict(MemorySegment data, int rows) throws XGBoostError {
        float[] x = data.toArray(ValueLayout.JAVA_FLOAT_UNALIGNED);
        float[][] r = booster.inplace_predict(x, rows, features, Float.NaN);
        if (groups == 1) {
            float[] out = new float[rows];
            for (int i = 0; i < rows; i++) {
                out[i] = r[i][0];
            }
            return out;
        }
        float[] out = new float[rows * groups];
        for (int i = 0; i < rows; i++) {
            System.arraycopy(r[i], 0, out, i * groups, groups);
        }
        return out;
    }

    @Override
    public void close() {
        booster.dispose();
    }
}
