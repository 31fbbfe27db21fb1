package io.backplane.backend.fil;

import io.backplane.testkit.ModelEnvironment;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * LightGBM models trained at test time by LightGBM's Python package (src/test/python/train_lightgbm.py)
 * in the model environment of {@code tools/model-env.sh}; tests that need them skip, naming that
 * script, where the environment or its lightgbm is missing.
 */
final class LightgbmModels {
    static final List<String> NAMES = List.of("lgb_binary", "lgb_regression", "lgb_multiclass");
    private static Path trained;
    private static String missing;

    private LightgbmModels() {
    }

    static Path environment() {
        return ModelEnvironment.directory();
    }

    /** The folder of the trained models (see the script), made on first use; skips the caller where it cannot be made. */
    static synchronized Path trained() throws IOException, InterruptedException {
        if (missing != null) {
            Assumptions.abort(missing);
        }
        if (trained != null) {
            return trained;
        }
        Path python = environment().resolve("bin/python");
        if (!Files.isExecutable(python)) {
            missing = "no model environment at " + environment() + " (it trains the LightGBM models with lightgbm); run tools/model-env.sh";
            Assumptions.abort(missing);
        }
        Path out = Files.createTempDirectory(Files.createDirectories(Path.of("target").toAbsolutePath()), "lightgbm-models");
        Path log = out.resolve("train.log");
        Process p = new ProcessBuilder(python.toString(), Path.of("src/test/python/train_lightgbm.py").toAbsolutePath().toString(), out.toString())
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(5, TimeUnit.MINUTES)) {
            p.destroyForcibly().waitFor();
            throw new IllegalStateException("train_lightgbm.py did not finish in 5 minutes; its output: " + Files.readString(log));
        }
        String output = Files.readString(log, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            if (output.contains("lightgbm is missing")) {
                missing = "the model environment " + environment() + " has no lightgbm; run tools/model-env.sh (it installs lightgbm)";
                Assumptions.abort(missing);
            }
            throw new IllegalStateException("train_lightgbm.py failed (exit " + p.exitValue() + "):\n" + output);
        }
        trained = out;
        return out;
    }

    /** The 64 rows of 8 features the script predicted. */
    static float[] rows() throws IOException, InterruptedException {
        return MemorySegment.ofArray(Files.readAllBytes(trained().resolve("rows.f32"))).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED);
    }

    /** LightGBM's own predictions of {@link #rows()} by model {@code name}, row-major. */
    static double[] expected(String name) throws IOException, InterruptedException {
        return MemorySegment.ofArray(Files.readAllBytes(trained().resolve(name).resolve("expected.f64"))).toArray(ValueLayout.JAVA_DOUBLE_UNALIGNED);
    }
}
