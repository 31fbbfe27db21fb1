package io.backplane.backend.cpu;

import static java.util.Objects.requireNonNull;

import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.OrtSession.SessionOptions;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.TensorConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The cpu backend: loads ONNX models into ONNX Runtime sessions, one session per instance.
 * Thread-safe: models load concurrently; the shared ORT environment is never closed (see {@link Ort}).
 */
final class OnnxBackend implements Backend {
    static final String DEFAULT_MODEL_FILENAME = "model.onnx";
    private static final Logger LOG = LoggerFactory.getLogger(OnnxBackend.class);

    private final BackendContext context;

    OnnxBackend(BackendContext context) {
        this.context = requireNonNull(context, "context is null");
        Ort.environment(); // load the native library now, so a broken install fails the backend, not the first model
        SessionSettings.from("(backend options)", context.options(), java.util.Map.of(), 1); // reject bad backend options early
    }

    @Override
    public ModelConfig autoCompleteConfig(ModelContext model) throws OrtException {
        ModelConfig config = tritonNames(model.config());
        if (!config.inputs().isEmpty() && !config.outputs().isEmpty()) {
            return config;
        }
        Path file = modelFile(model);
        String where = where(model);
        // A metadata-only session: no graph optimization, one thread.
        try (SessionOptions options = new SessionOptions()) {
            options.setOptimizationLevel(SessionOptions.OptLevel.NO_OPT);
            options.setIntraOpNumThreads(1);
            try (OrtSession session = openSession(file, options, where)) {
                ModelConfig completed = Signatures.complete(config, session.getInputInfo(), session.getOutputInfo(), where);
                LOG.info("{}: filled config from the model: inputs {}, outputs {}", where, completed.inputs(), completed.outputs());
                return completed;
            }
        }
    }

    /**
     * Triton's names, as its auto-complete writes them: platform {@code onnxruntime_onnx}, and backend
     * {@code onnxruntime} where the config.pbtxt named none (platform only, or no config.pbtxt at all:
     * the core then inferred this backend from {@code model.onnx} under its own name). A backend the
     * file names ({@code "cpu"} or {@code "onnxruntime"}) is kept.
     */
    static ModelConfig tritonNames(ModelConfig config) {
        ModelConfig.Builder b = config.toBuilder();
        if (config.backend().isEmpty() || (config.backend().equals(OnnxBackendFactory.NAME) && !config.raw().has("backend"))) {
            b.backend("onnxruntime");
        }
        if (config.platform().isEmpty()) {
            b.platform("onnxruntime_onnx");
        }
        return b.build();
    }

    @Override
    public Model loadModel(ModelContext model) throws OrtException {
        String where = where(model);
        ModelConfig config = model.config();
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.GPU) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": instance_group '" + g.name()
                        + "' asks for KIND_GPU but the cpu backend runs on the CPU only; use KIND_CPU (or the cuda backend)");
            }
        }
        if (config.decoupled()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": the cpu backend answers each request once; remove"
                    + " model_transaction_policy { decoupled: true }");
        }
        config = withSequenceTensors(config);
        Path file = modelFile(model);
        SessionSettings settings = SessionSettings.from(config, context.options());
        OrtSession first = OnnxModel.createSession(file, settings, where);
        try {
            ModelConfig effective = Signatures.complete(config, first.getInputInfo(), first.getOutputInfo(), where);
            Signatures.check(effective, first.getInputInfo(), first.getOutputInfo(), where);
            LOG.info("{}: loaded {} ({} intra-op / {} inter-op threads, {}, optimization {}{})", where, file, settings.intraOpThreads(),
                    settings.interOpThreads(), settings.executionMode(), settings.optimizationLevel(),
                    settings.accelerators().isEmpty() ? "" : ", accelerators " + settings.accelerators());
            return new OnnxModel(where, effective, file, settings, first);
        } catch (OrtException | RuntimeException e) {
            OnnxModel.closeSession(first, where);
            throw e;
        }
    }

    @Override
    public void close() {
        // The ORT environment outlives the backend on purpose (see Ort): nothing else is backend-wide.
        LOG.debug("cpu backend closed");
    }

    /**
     * A stateful model's graph also takes the tensors the core fills (its {@code control_input}s and
     * state inputs) and produces its state outputs; the session binds them like declared ones. The
     * core adds the inputs to each request and takes the state outputs out of each response, so
     * clients never see them.
     */
    static ModelConfig withSequenceTensors(ModelConfig config) {
        SequenceBatching sb = config.sequenceBatching();
        if (sb == null || sb.controls().isEmpty() && sb.states().isEmpty()) {
            return config;
        }
        ModelConfig.Builder b = config.toBuilder();
        for (SequenceBatching.Control c : sb.controls()) {
            b.input(TensorConfig.of(c.inputName(), c.dataType(), 1));
        }
        for (SequenceBatching.State s : sb.states()) {
            long[] dims = s.dims().stream().mapToLong(Long::longValue).toArray();
            b.input(TensorConfig.of(s.inputName(), s.dataType(), dims));
            b.output(TensorConfig.of(s.outputName(), s.dataType(), dims));
        }
        return b.build();
    }

    static String where(ModelContext model) {
        return "model '" + model.name() + "' version " + model.version();
    }

    /**
     * The model file: {@code default_model_filename} or model.onnx in the version folder (a folder named so holds model.onnx),
     * checked by the host ({@link ModelContext#checkedFile}: by default its real path must stay in the model repository).
     */
    static Path modelFile(ModelContext model) {
        String name = model.config().defaultModelFilename().isEmpty() ? DEFAULT_MODEL_FILENAME : model.config().defaultModelFilename();
        Path dir = model.versionDirectory().toAbsolutePath().normalize();
        Path file = dir.resolve(name).normalize();
        if (!file.startsWith(dir) || file.equals(dir)) {
            throw BackplaneException.invalid(where(model) + ": default_model_filename '" + name + "' leaves the version folder " + dir);
        }
        if (Files.isDirectory(file)) {
            file = file.resolve(DEFAULT_MODEL_FILENAME); // Triton's layout for models with external weights
        }
        if (!Files.isRegularFile(file)) {
            throw BackplaneException.notFound(where(model) + ": no model file at " + file + "; put the ONNX model there, or name it"
                    + " with default_model_filename in config.pbtxt");
        }
        return model.checkedFile(file, "default_model_filename '" + name + "'");
    }

    static OrtSession openSession(Path file, SessionOptions options, String where) {
        try {
            return Ort.environment().createSession(file.toString(), options);
        } catch (OrtException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, where + ": ONNX Runtime " + Ort.version() + " cannot load " + file
                    + " as an ONNX model: " + e.getMessage() + irAdvice(String.valueOf(e.getMessage())), e);
        }
    }

    private static final java.util.regex.Pattern IR_REFUSAL = java.util.regex.Pattern.compile(
            "Unsupported model IR version: (\\d+), max supported IR version: (\\d+)");

    /**
     * What to do about ORT's refusal of a newer IR version: the {@code onnx} package writes its newest
     * IR version by default (1.23 writes 14) before any ONNX Runtime reads it; a model that uses none
     * of the newer IR's additions loads once saved with the older number.
     */
    static String irAdvice(String ortMessage) {
        java.util.regex.Matcher m = IR_REFUSAL.matcher(ortMessage);
        if (!m.find()) {
            return "";
        }
        return ". ONNX Runtime " + Ort.version() + " reads IR versions up to " + m.group(2) + "; save the model with ir_version "
                + m.group(2) + " (in Python: onnx.helper.make_model(graph, ir_version=" + m.group(2) + "), or set model.ir_version = " + m.group(2)
                + " before onnx.save when it uses no newer IR feature), or export it with an opset that IR version " + m.group(2) + " covers";
    }
}
