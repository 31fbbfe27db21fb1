package io.backplane.backend.fil;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Writes fil models into a Triton-layout repository: {@code <repo>/<name>/config.pbtxt} and {@code <repo>/<name>/1/<file>}. */
final class FilRepository {
    private FilRepository() {
    }

    /**
     * A config.pbtxt as Triton's FIL documentation writes it.
     *
     * @param extra more top-level text, e.g. {@code dynamic_batching { }} or parameters entries (inside {@code parameters [ ]})
     */
    static String config(String modelType, int features, int outputs, boolean classifier, boolean proba, String extraParameters, String extra) {
        return """
                backend: "fil"
                max_batch_size: 64
                input [ { name: "input__0" data_type: TYPE_FP32 dims: [ %d ] } ]
                output [ { name: "output__0" data_type: TYPE_FP32 dims: [ %d ] } ]
                instance_group [ { kind: KIND_CPU count: 2 } ]
                parameters [
                  { key: "model_type" value: { string_value: "%s" } },
                  { key: "output_class" value: { string_value: "%s" } },
                  { key: "predict_proba" value: { string_value: "%s" } }%s
                ]
                %s
                """.formatted(features, outputs, modelType, classifier, proba, extraParameters, extra);
    }

    static void write(Path repo, String name, String config, String file, byte[] model) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), config);
        Files.write(dir.resolve(file), model);
    }
}
