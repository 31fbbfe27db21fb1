package io.backplane.backend.python;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Triton's auto-complete for python models: {@code TritonPythonModel.auto_complete_config} runs
 * once, in a short-lived stub process of the model's interpreter, before the core validates the
 * config; what it adds (inputs, outputs, max_batch_size, dynamic batching, the transaction
 * policy) becomes the model's config, which {@code initialize} and the config endpoints then see.
 * A model whose files never mention {@code auto_complete_config} is not started for it.
 */
final class AutoComplete {
    private static final Logger log = LoggerFactory.getLogger(AutoComplete.class);
    static final String METHOD = "auto_complete_config";

    private AutoComplete() {
    }

    static ModelConfig complete(PythonBackend backend, ModelContext context) {
        PythonModel.checkStubName(context.name(), "model name");
        ModelConfig c = context.config();
        String file = c.defaultModelFilename().isEmpty() ? "model.py" : c.defaultModelFilename();
        Path versionDir = context.versionDirectory();
        Path modelFile = versionDir.resolve(file);
        if (!Files.isRegularFile(modelFile) || !mentionsAutoComplete(versionDir)) {
            return c;
        }
        context.checkedFile(modelFile, c.defaultModelFilename().isEmpty() ? "model file" : "default_model_filename '" + file + "'");
        StubSettings settings = backend.settingsFor(context, c);
        Path dir = null;
        try {
            dir = Files.createTempDirectory(backend.stubDirectory(), "auto-complete-");
            Path request = dir.resolve("request.json");
            Path answer = dir.resolve("answer.json");
            Path output = dir.resolve("output.txt");
            Map<String, Object> req = new LinkedHashMap<>();
            req.put("model_file", modelFile.toString());
            req.put("version_dir", versionDir.toString());
            req.put("config", PythonModel.tritonConfig(c));
            req.put("declared_decoupled", c.decoupled());
            Files.writeString(request, Wire.json(req));
            ProcessBuilder pb = new ProcessBuilder(settings.interpreter(), "-u", "-B", backend.stubDirectory().resolve("backplane_stub.py").toString(),
                    "--auto-complete", request.toString(), "--out", answer.toString())
                    .redirectErrorStream(true).redirectOutput(output.toFile()).redirectInput(ProcessBuilder.Redirect.PIPE);
            Map<String, String> env = pb.environment();
            String pp = env.get("PYTHONPATH");
            env.put("PYTHONPATH", backend.stubDirectory() + (pp == null || pp.isEmpty() ? "" : ":" + pp));
            Process p;
            try {
                p = pb.start();
            } catch (IOException e) {
                throw new BackplaneException(ErrorCode.UNAVAILABLE, "model '" + context.name() + "': cannot start the python interpreter '"
                        + settings.interpreter() + "' for " + METHOD + "(): " + e.getMessage() + "; install python3 with numpy or set '"
                        + StubSettings.INTERPRETER + "'", e);
            }
            // like a stub, it leads a process group of its own (setsid() first): what auto_complete_config() started ends with it
            ProcessGroup group = ProcessGroup.of(p);
            p.getOutputStream().close();
            boolean ended;
            try {
                ended = p.waitFor(settings.startupTimeoutMillis(), TimeUnit.MILLISECONDS);
                group.kill();
            } catch (InterruptedException e) {
                group.kill();
                p.destroyForcibly();
                Thread.currentThread().interrupt();
                throw BackplaneException.unavailable("model '" + context.name() + "': interrupted while running " + METHOD + "()");
            }
            String printed = Files.readString(output, StandardCharsets.UTF_8).strip();
            if (!printed.isEmpty()) {
                log.info("model '{}' {}() printed:\n{}", context.name(), METHOD, printed);
            }
            if (!ended) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
                group.kill();
                throw BackplaneException.unavailable("model '" + context.name() + "': " + METHOD + "() did not finish within "
                        + settings.startupTimeoutMillis() + " ms ('" + StubSettings.STARTUP_TIMEOUT + "')");
            }
            if (!Files.isRegularFile(answer)) {
                throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "model '" + context.name() + "': the python stub exited with code "
                        + p.exitValue() + " while running " + METHOD + "()" + (printed.isEmpty() ? "" : "; what it printed is in the server log"),
                        printed.isEmpty() ? null : printed, null);
            }
            JsonNode a = StubJson.parse(Files.readString(answer, StandardCharsets.UTF_8), METHOD + "() result");
            if (a.has("error")) {
                throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "model '" + context.name() + "': " + METHOD + "() failed: "
                        + a.get("error").asText(), a.path("traceback").asText(""), null); // the traceback quotes source: the log only
            }
            return merge(context.name(), c, a.get("config"));
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INTERNAL, "model '" + context.name() + "': " + METHOD + "() could not run: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw BackplaneException.unavailable("model '" + context.name() + "': interrupted while running " + METHOD + "()");
        } finally {
            if (dir != null) {
                ExecutionEnvironments.deleteTree(dir);
            }
        }
    }

    private static boolean mentionsAutoComplete(Path versionDir) {
        try (Stream<Path> files = Files.walk(versionDir, 3)) {
            return files.filter(f -> f.toString().endsWith(".py") && Files.isRegularFile(f)).anyMatch(f -> {
                try {
                    return Files.readString(f, StandardCharsets.UTF_8).contains(METHOD);
                } catch (IOException | RuntimeException e) {
                    return true; // unreadable here: let the stub decide
                }
            });
        } catch (IOException e) {
            return true;
        }
    }

    /** The config with what auto_complete_config() filled in; what the model may not change stays. */
    static ModelConfig merge(String model, ModelConfig c, @Nullable JsonNode completed) {
        if (completed == null || !completed.isObject()) {
            throw BackplaneException.invalid("model '" + model + "': " + METHOD + "() returned no config object");
        }
        ModelConfig.Builder b = c.toBuilder();
        b.maxBatchSize(completed.path("max_batch_size").asInt(c.maxBatchSize()));
        b.clearInputs();
        for (TensorConfig t : tensors(model, "input", completed.path("input"), c.inputs())) {
            b.input(t);
        }
        b.clearOutputs();
        for (TensorConfig t : tensors(model, "output", completed.path("output"), c.outputs())) {
            b.output(t);
        }
        if (completed.has("dynamic_batching") && c.dynamicBatching() == null) {
            b.dynamicBatching(DynamicBatching.DEFAULT);
        }
        JsonNode policy = completed.path("model_transaction_policy");
        if (policy.has("decoupled")) {
            b.decoupled(policy.get("decoupled").asBoolean());
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw BackplaneException.invalid("model '" + model + "': the config completed by " + METHOD + "() is invalid: " + e.getMessage());
        }
    }

    private static List<TensorConfig> tensors(String model, String kind, JsonNode list, List<TensorConfig> declared) {
        List<TensorConfig> out = new ArrayList<>();
        for (JsonNode t : list) {
            String name = t.path("name").asText("");
            DataType type;
            try {
                type = DataType.fromConfigName(t.path("data_type").asText(""));
            } catch (BackplaneException e) {
                throw BackplaneException.invalid("model '" + model + "': " + kind + " '" + name + "' from " + METHOD + "(): " + e.getMessage());
            }
            List<Long> dims = new ArrayList<>();
            for (JsonNode d : t.path("dims")) {
                dims.add(d.asLong());
            }
            List<Long> reshape = null;
            for (TensorConfig d : declared) {
                if (d.name().equals(name)) {
                    reshape = d.reshape();
                }
            }
            try {
                out.add(TensorConfig.builder(name, type).dims(dims).reshape(reshape).optional(t.path("optional").asBoolean(false)).build());
            } catch (IllegalArgumentException e) {
                throw BackplaneException.invalid("model '" + model + "': " + kind + " from " + METHOD + "(): " + e.getMessage());
            }
        }
        return out;
    }
}
