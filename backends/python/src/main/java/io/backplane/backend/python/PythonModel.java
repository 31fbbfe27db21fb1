package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** One loaded model version; each instance gets its own stub process. */
final class PythonModel implements Model {
    private final PythonBackend backend;
    private final ModelContext context;
    private final StubSettings settings;
    private final Path modelFile;
    private final String configJson;

    PythonModel(PythonBackend backend, ModelContext context) {
        this.backend = backend;
        this.context = context;
        checkStubName(context.name(), "model name");
        ModelConfig c = context.config();
        this.settings = backend.settingsFor(context, c);
        String file = c.defaultModelFilename().isEmpty() ? "model.py" : c.defaultModelFilename();
        this.modelFile = context.versionDirectory().resolve(file);
        if (!Files.isRegularFile(modelFile)) {
            throw BackplaneException.notFound("model '" + context.name() + "' version " + context.version() + ": " + modelFile
                    + " does not exist; a python model needs <repository>/<model>/<version>/" + file);
        }
        context.checkedFile(modelFile, c.defaultModelFilename().isEmpty() ? "model file" : "default_model_filename '" + file + "'");
        this.configJson = Wire.json(tritonConfig(c));
    }

    PythonBackend backend() {
        return backend;
    }

    ModelContext context() {
        return context;
    }

    StubSettings settings() {
        return settings;
    }

    String name() {
        return context.name();
    }

    /** The characters Triton's python backend refuses in a stub's name (its {@code INVALID_CHARS}): a shell would read them. */
    static final String INVALID_CHARS = ";|&$`<>()[]{}\\\"'*?~#!";

    /**
     * Refuses a model or instance name that Triton's python backend refuses for its stub, with
     * Triton's sentence first.
     *
     * @throws BackplaneException INVALID_ARGUMENT
     */
    static void checkStubName(String name, String what) {
        for (int i = 0; i < name.length(); i++) {
            if (INVALID_CHARS.indexOf(name.charAt(i)) >= 0) {
                throw BackplaneException.invalid("Invalid stub name: contains invalid characters (python backend: " + what + " '" + name
                        + "' contains '" + name.charAt(i) + "'; a python model's name and instance names must not contain any of "
                        + INVALID_CHARS + ")");
            }
        }
    }

    @Override
    public ModelInstance createInstance(InstanceContext instance) {
        checkStubName(instance.name(), "instance name");
        return PythonInstance.start(this, instance);
    }

    String initJson(InstanceContext instance) {
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("model_config", configJson);
        args.put("model_instance_kind", instance.kind() == InstanceKind.AUTO ? "CPU" : instance.kind().name());
        args.put("model_instance_name", instance.name());
        args.put("model_instance_device_id", Integer.toString(instance.deviceId()));
        args.put("model_repository", context.modelDirectory().toString());
        args.put("model_version", Long.toString(context.version()));
        args.put("model_name", context.name());
        Map<String, Object> init = new LinkedHashMap<>();
        init.put("args", args);
        init.put("model_file", modelFile.toString());
        init.put("version_dir", context.versionDirectory().toString());
        init.put("decoupled", context.config().decoupled());
        init.put("response_credits", Wire.RESPONSE_CREDITS);
        return Wire.json(init);
    }

    /** The model config as Triton hands it to {@code initialize} (its protobuf JSON form). */
    static Map<String, Object> tritonConfig(ModelConfig c) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", c.name());
        m.put("platform", c.platform());
        m.put("backend", c.backend());
        m.put("max_batch_size", c.maxBatchSize());
        m.put("input", tensors(c.inputs()));
        m.put("output", tensors(c.outputs()));
        List<Object> groups = new ArrayList<>();
        for (InstanceGroup g : c.instanceGroups()) {
            Map<String, Object> gm = new LinkedHashMap<>();
            gm.put("name", g.name());
            gm.put("kind", "KIND_" + g.kind().name());
            gm.put("count", g.count());
            gm.put("gpus", g.gpus());
            groups.add(gm);
        }
        m.put("instance_group", groups);
        if (c.dynamicBatching() != null) {
            m.put("dynamic_batching", Map.of());
        }
        Map<String, Object> params = new LinkedHashMap<>();
        c.parameters().forEach((k, v) -> params.put(k, Map.of("string_value", v)));
        m.put("parameters", params);
        m.put("model_transaction_policy", Map.of("decoupled", c.decoupled()));
        m.put("default_model_filename", c.defaultModelFilename());
        return m;
    }

    private static List<Object> tensors(List<TensorConfig> ts) {
        List<Object> out = new ArrayList<>();
        for (TensorConfig t : ts) {
            Map<String, Object> tm = new LinkedHashMap<>();
            tm.put("name", t.name());
            tm.put("data_type", t.dataType().configName());
            tm.put("dims", t.dims());
            if (t.reshape() != null) {
                tm.put("reshape", Map.of("shape", t.reshape()));
            }
            tm.put("optional", t.optional());
            out.add(tm);
        }
        return out;
    }

    @Override
    public void close() {
        // instances own the processes; nothing model-wide to release
    }
}
