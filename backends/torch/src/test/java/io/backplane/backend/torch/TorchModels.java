package io.backplane.backend.torch;

import io.backplane.testkit.ModelEnvironment;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * The test models, traced at test time with the model environment's torch
 * ({@code src/test/resources/torch/make_models.py}, run once per test JVM into
 * {@code target/torch-models}), never committed. Where the environment is missing the calling test
 * skips, naming {@code tools/model-env.sh}.
 *
 * <p>The environment: {@code $BACKPLANE_MODEL_ENV}, else {@code ~/.cache/backplane/model-env}.
 */
final class TorchModels {
    private static Path made;
    private static String missing;

    private TorchModels() {
    }

    static Path environment() {
        return ModelEnvironment.directory();
    }

    /** The folder with one sub-folder per model (model.pt, in_i.bin, out_i.bin, shapes.txt); skips where torch is missing. */
    static synchronized Path dir() throws IOException, InterruptedException {
        if (missing != null) {
            Assumptions.abort(missing);
        }
        if (made != null) {
            return made;
        }
        Path py = environment().resolve("bin/python");
        if (!Files.isExecutable(py)) {
            missing = "no model environment at " + environment() + " (torch); run tools/model-env.sh to make it";
            Assumptions.abort(missing);
        }
        Path out = Path.of("target/torch-models").toAbsolutePath();
        Path script = Path.of("src/test/resources/torch/make_models.py").toAbsolutePath();
        Path log = Files.createDirectories(out).resolve("make_models.log");
        Process p = new ProcessBuilder(py.toString(), script.toString(), out.toString()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new IllegalStateException("make_models.py did not finish in 300 s; see " + log);
        }
        String text = Files.readString(log, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            if (text.contains("No module named")) {
                missing = "the model environment " + environment() + " has no torch; run tools/model-env.sh";
                Assumptions.abort(missing);
            }
            throw new IllegalStateException("make_models.py failed (exit " + p.exitValue() + "):\n" + text);
        }
        made = out;
        return out;
    }

    static byte[] modelFile(String model) throws IOException, InterruptedException {
        return Files.readAllBytes(dir().resolve(model).resolve("model.pt"));
    }

    /** One tensor python wrote: its dtype name (torch's), shape and raw little-endian bytes. */
    record Saved(String dtype, long[] shape, byte[] bytes) {
        float[] floats() {
            ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
            float[] f = new float[bytes.length / 4];
            b.asFloatBuffer().get(f);
            return f;
        }

        long[] longs() {
            ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
            long[] l = new long[bytes.length / 8];
            b.asLongBuffer().get(l);
            return l;
        }
    }

    /** in_0, in_1, ..., out_0, ... of a model, by name. */
    static Map<String, Saved> tensors(String model) throws IOException, InterruptedException {
        Path d = dir().resolve(model);
        Map<String, Saved> out = new LinkedHashMap<>();
        for (String line : Files.readAllLines(d.resolve("shapes.txt"))) {
            List<String> f = List.of(line.split(" "));
            long[] shape = f.size() < 3 || f.get(2).isEmpty() ? new long[0] : java.util.Arrays.stream(f.get(2).split(",")).mapToLong(Long::parseLong).toArray();
            out.put(f.get(0), new Saved(f.get(1), shape, Files.readAllBytes(d.resolve(f.get(0) + ".bin"))));
        }
        return out;
    }
}
