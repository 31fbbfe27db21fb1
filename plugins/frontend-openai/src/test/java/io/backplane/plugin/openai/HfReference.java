package io.backplane.plugin.openai;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * The reference the HF-compatibility tests compare with: {@code transformers} itself, run once per test class by the
 * model environment's python ({@code $BACKPLANE_MODEL_ENV}, else {@code ~/.cache/backplane/model-env}, made by
 * {@code tools/model-env.sh}; tests skip naming it where it is missing). {@code hf_reference.py} trains tiny byte-level
 * BPE tokenizers locally (no download), saves them with the spec's chat templates, and answers every render and count
 * of the spec in one run.
 */
final class HfReference {

    static final ObjectMapper JSON = new ObjectMapper();

    private HfReference() {}

    static Path python() {
        String env = System.getenv("BACKPLANE_MODEL_ENV");
        Path dir = env != null && !env.isBlank() ? Path.of(env) : Path.of(System.getProperty("user.home"), ".cache/backplane/model-env");
        Path py = dir.resolve("bin/python");
        Assumptions.assumeTrue(Files.isExecutable(py), "no model environment at " + dir
                + " (transformers, tokenizers); run tools/model-env.sh to make it");
        return py;
    }

    static String resource(String name) {
        try (InputStream in = Objects.requireNonNull(HfReference.class.getResourceAsStream(name), name + " is not on the test classpath")) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read the test resource " + name, e);
        }
    }

    /** Runs hf_reference.py on {@code spec} (its "dir" is set to {@code dir}/tokenizers) and returns its answer. */
    static Map<String, Object> run(Path dir, Map<String, Object> spec) throws IOException, InterruptedException {
        Path py = python();
        Path script = dir.resolve("hf_reference.py");
        Files.writeString(script, resource("hf_reference.py"));
        Path specFile = dir.resolve("spec.json");
        Path outFile = dir.resolve("out.json");
        Path log = dir.resolve("python.log");
        spec.put("dir", dir.resolve("tokenizers").toString());
        JSON.writeValue(specFile.toFile(), spec);
        Process p = new ProcessBuilder(py.toString(), script.toString(), specFile.toString(), outFile.toString())
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                throw new IllegalStateException("hf_reference.py did not finish within its 10-minute deadline; its output so far:\n"
                        + Files.readString(log));
            }
        } finally {
            if (p.isAlive()) {
                p.destroyForcibly();
                p.waitFor();
            }
        }
        String output = Files.readString(log);
        Assumptions.assumeFalse(p.exitValue() != 0 && output.contains("No module named"),
                "the model environment lacks transformers/tokenizers; run tools/model-env.sh\n" + output);
        if (p.exitValue() != 0) {
            throw new IllegalStateException("hf_reference.py failed (exit " + p.exitValue() + "):\n" + output);
        }
        return JSON.readValue(outFile.toFile(), new TypeReference<Map<String, Object>>() {});
    }

    /** A JSON text as the Java values a frontend gets from Jackson (LinkedHashMap, ArrayList, Integer, Double ...). */
    static <T> T parse(String json, TypeReference<T> type) {
        try {
            return JSON.readValue(json, type);
        } catch (IOException e) {
            throw new IllegalArgumentException("bad test JSON: " + json, e);
        }
    }

    static List<Map<String, Object>> messages(String json) {
        return parse(json, new TypeReference<List<Map<String, Object>>>() {});
    }
}
