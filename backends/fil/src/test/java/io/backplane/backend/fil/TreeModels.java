package io.backplane.backend.fil;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import ml.dmlc.xgboost4j.java.Booster;
import ml.dmlc.xgboost4j.java.DMatrix;
import ml.dmlc.xgboost4j.java.XGBoost;
import ml.dmlc.xgboost4j.java.XGBoostError;

/** XGBoost models made at test time with xgboost4j (never committed), and rows to send them. */
final class TreeModels {
    static final int FEATURES = 8;

    private TreeModels() {
    }

    /** {@code n} rows of {@link #FEATURES} features from {@code seed}; about one value in 16 is NaN (missing). */
    static float[] rows(long seed, int n) {
        SplittableRandom rnd = new SplittableRandom(seed);
        float[] x = new float[n * FEATURES];
        for (int i = 0; i < x.length; i++) {
            x[i] = rnd.nextInt(16) == 0 ? Float.NaN : (float) rnd.nextGaussian();
        }
        return x;
    }

    /** A binary classifier ({@code binary:logistic}) or a regressor ({@code reg:squarederror}), 20 trees of depth 4. */
    static Booster train(boolean classifier) throws XGBoostError {
        int n = 400;
        float[] x = rows(42, n);
        float[] y = new float[n];
        for (int i = 0; i < n; i++) {
            float a = nz(x[i * FEATURES]);
            float b = nz(x[i * FEATURES + 1]);
            float c = nz(x[i * FEATURES + 2]);
            y[i] = classifier ? (a + b * c > 0 ? 1f : 0f) : 2f * a - b + c * c;
        }
        DMatrix d = new DMatrix(x, n, FEATURES, Float.NaN);
        try {
            d.setLabel(y);
            Map<String, Object> params = new HashMap<>();
            params.put("objective", classifier ? "binary:logistic" : "reg:squarederror");
            params.put("max_depth", 4);
            params.put("eta", 0.3);
            params.put("nthread", 1);
            params.put("seed", 7);
            return XGBoost.train(d, params, 20, Map.of(), null, null);
        } finally {
            d.dispose();
        }
    }

    /** xgboost4j's own predictions of {@code rows} (through a DMatrix), row-major. */
    static float[] predict(Booster booster, float[] rows) throws XGBoostError {
        int n = rows.length / FEATURES;
        DMatrix d = new DMatrix(rows, n, FEATURES, Float.NaN);
        try {
            float[][] p = booster.predict(d);
            int w = p[0].length;
            float[] out = new float[n * w];
            for (int i = 0; i < n; i++) {
                System.arraycopy(p[i], 0, out, i * w, w);
            }
            return out;
        } finally {
            d.dispose();
        }
    }

    private static float nz(float v) {
        return Float.isNaN(v) ? 0f : v;
    }
}
