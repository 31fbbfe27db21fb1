package io.backplane.backend.fil;

import com.microsoft.ml.lightgbm.SWIGTYPE_p_double;
import com.microsoft.ml.lightgbm.SWIGTYPE_p_int;
import com.microsoft.ml.lightgbm.SWIGTYPE_p_long_long;
import com.microsoft.ml.lightgbm.SWIGTYPE_p_p_void;
import com.microsoft.ml.lightgbm.SWIGTYPE_p_void;
import com.microsoft.ml.lightgbm.lightgbmlib;
import io.backplane.spi.BackplaneException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A LightGBM model (its text format) through lightgbm4j's SWIG API. {@link #predict} hands
 * LightGBM the rows' own memory (no copy: lightgbm4j's pointer types wrap the address) and
 * LightGBM writes into memory of ours. {@code LGBM_BoosterPredictForMat} takes a shared lock on
 * the booster and builds its predictor per call, so concurrent predictions on one booster are safe:
 * the instances of a model share it. NaN is a missing value (LightGBM's default, as in FIL).
 */
final class LightgbmEngine implements TreeEngine {
    private static final int C_API_DTYPE_FLOAT32 = 0;
    private static final int C_API_PREDICT_NORMAL = 0;

    private final SWIGTYPE_p_void handle;
    private final int features;
    private final int groups;
    /** LightGBM's prediction parameters: {@code num_threads=N} for cpu_nthread, else none. */
    private final String predictParameters;

    private LightgbmEngine(SWIGTYPE_p_void handle, int features, int groups, String predictParameters) {
        this.handle = handle;
        this.features = features;
        this.groups = groups;
        this.predictParameters = predictParameters;
    }

    static LightgbmEngine load(Path file, String model, int threads) throws IOException {
        NativeLibraries.lightgbm();
        String text = Files.readString(file, StandardCharsets.UTF_8);
        SWIGTYPE_p_p_void out = lightgbmlib.new_voidpp();
        SWIGTYPE_p_int iterations = lightgbmlib.new_intp();
        try {
            if (lightgbmlib.LGBM_BoosterLoadModelFromString(text, iterations, out) != 0) {
                throw BackplaneException.invalid("model '" + model + "': LightGBM could not read " + file.getFileName() + " ("
                        + lightgbmlib.LGBM_GetLastError() + "); model_type lightgbm needs LightGBM's text format (Booster.save_model)");
            }
            SWIGTYPE_p_void handle = lightgbmlib.voidpp_value(out);
            try {
                return new LightgbmEngine(handle, intOf(handle, true), intOf(handle, false), threads > 0 ? "num_threads=" + threads : "");
            } catch (RuntimeException e) {
                lightgbmlib.LGBM_BoosterFree(handle);
                throw e;
            }
        } finally {
            lightgbmlib.delete_voidpp(out);
            lightgbmlib.delete_intp(iterations);
        }
    }

    private static int intOf(SWIGTYPE_p_void handle, boolean features) {
        SWIGTYPE_p_int p = lightgbmlib.new_intp();
        try {
            int rc = features ? lightgbmlib.LGBM_BoosterGetNumFeature(handle, p) : lightgbmlib.LGBM_BoosterGetNumClasses(handle, p);
            if (rc != 0) {
                throw BackplaneException.internal("LightGBM: " + lightgbmlib.LGBM_GetLastError());
            }
            return lightgbmlib.intp_value(p);
        } finally {
            lightgbmlib.delete_intp(p);
        }
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
    public float[] predict(MemorySegment data, int rows) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment x = data; // RowBatch.stack: native memory, aligned to the element size
            MemorySegment len = arena.allocate(ValueLayout.JAVA_LONG);
            MemorySegment result = arena.allocate(ValueLayout.JAVA_DOUBLE, (long) rows * groups);
            int rc = lightgbmlib.LGBM_BoosterPredictForMat(handle, new VoidPtr(x.address()), C_API_DTYPE_FLOAT32, rows, features, 1,
                    C_API_PREDICT_NORMAL, 0, -1, predictParameters, new LongPtr(len.address()), new DoublePtr(result.address()));
            if (rc != 0) {
                throw BackplaneException.internal("LightGBM could not predict " + rows + " row(s): " + lightgbmlib.LGBM_GetLastError());
            }
            long n = len.get(ValueLayout.JAVA_LONG, 0);
            if (n != (long) rows * groups) {
                throw BackplaneException.internal("LightGBM predicted " + n + " values for " + rows + " row(s) of " + groups + " group(s)");
            }
            float[] out = new float[Math.toIntExact(n)];
            for (int i = 0; i < out.length; i++) {
                out[i] = (float) result.getAtIndex(ValueLayout.JAVA_DOUBLE, i);
            }
            return out;
        }
    }

    @Override
    public void close() {
        lightgbmlib.LGBM_BoosterFree(handle);
    }

    /** lightgbm4j's pointer types, around memory of ours (SWIG's constructors are protected for this). */
    private static final class VoidPtr extends SWIGTYPE_p_void {
        VoidPtr(long address) {
            super(address, false);
        }
    }

    private static final class LongPtr extends SWIGTYPE_p_long_long {
        LongPtr(long address) {
            super(address, false);
        }
    }

    private static final class DoublePtr extends SWIGTYPE_p_double {
        DoublePtr(long address) {
            super(address, false);
        }
    }
}
