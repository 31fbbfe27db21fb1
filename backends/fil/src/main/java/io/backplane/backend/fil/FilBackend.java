package io.backplane.backend.fil;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.engine.NativeGuard;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Backend-wide state of {@code fil}: nothing but the context. {@link #loadModel} reads the
 * model's FIL parameters, loads its file into the library its {@code model_type} names, and
 * checks {@code input__0}/{@code output__0} against what the model really is (feature count,
 * output width), so a mismatch fails the load with the numbers instead of failing every request.
 */
final class FilBackend implements Backend {
    private static final Logger LOG = LoggerFactory.getLogger(FilBackend.class);
    static final String INPUT = "input__0";
    static final String OUTPUT = "output__0";

    private final BackendContext context;

    FilBackend(BackendContext context) {
        this.context = context;
    }

    @Override
    public Model loadModel(ModelContext ctx) throws Exception {
        ModelConfig config = ctx.config();
        String name = ctx.name();
        if (config.decoupled()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + name + "': backend 'fil' answers each request once; remove decoupled: true");
        }
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.GPU) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + name
                        + "': backend 'fil' runs on the CPU here; use instance_group { kind: KIND_CPU } (or KIND_AUTO)");
            }
        }
        FilConfig fil = FilConfig.of(config);
        TensorConfig input = single(config, config.inputs(), INPUT, "input");
        TensorConfig output = single(config, config.outputs(), OUTPUT, "output");
        String fileName = config.defaultModelFilename().isEmpty() ? fil.modelType().defaultFile : config.defaultModelFilename();
        Path file = ctx.versionDirectory().resolve(fileName);
        if (!Files.isRegularFile(file)) {
            throw BackplaneException.invalid("model '" + name + "': model_type " + fil.modelType().value + " reads " + file
                    + ", which does not exist; put the model there (or name its file with default_model_filename)");
        }
        TreeEngine engine = switch (fil.modelType()) {
            case LIGHTGBM -> LightgbmEngine.load(file, name, fil.threads());
            case XGBOOST, XGBOOST_JSON, XGBOOST_UBJ -> XgboostEngine.load(file, fil.modelType(), name, fil.threads());
        };
        try {
            long declaredIn = input.dims().getLast();
            if (declaredIn != -1 && declaredIn != engine.features()) {
                throw BackplaneException.invalid("model '" + name + "': " + INPUT + " declares " + declaredIn + " features (dims " + input.dims()
                        + ") but " + fileName + " was trained on " + engine.features() + "; set dims: [ " + engine.features() + " ]");
            }
            long declaredOut = output.dims().getLast();
            int width = fil.outputWidth(engine.groups(), declaredOut);
            if (declaredOut != -1 && declaredOut != width) {
                throw BackplaneException.invalid("model '" + name + "': " + OUTPUT + " declares dims " + output.dims() + " but this model ("
                        + describe(fil, engine) + ") gives " + width + " value(s) per row; set dims: [ " + width + " ]");
            }
            LOG.info("fil model '{}' version {}: {} ({}), {} features, {} value(s) per row", name, ctx.version(), fileName, describe(fil, engine),
                    engine.features(), width);
            return new FilModel(name, config, fil, engine, width);
        } catch (RuntimeException e) {
            engine.close();
            throw e;
        }
    }

    private static String describe(FilConfig fil, TreeEngine engine) {
        if (!fil.classifier()) {
            return "a regressor" + (engine.groups() > 1 ? " of " + engine.groups() + " outputs" : "");
        }
        String kind = engine.groups() == 1 ? "a binary classifier" : "a classifier of " + engine.groups() + " classes";
        return kind + (fil.predictProba() ? ", predict_proba" : ", class index");
    }

    private static TensorConfig single(ModelConfig config, List<TensorConfig> tensors, String expected, String what) {
        String model = config.name();
        if (tensors.size() != 1 || !tensors.getFirst().name().equals(expected)) {
            throw BackplaneException.invalid("model '" + model + "': backend 'fil' has one " + what + " named " + expected + ", the config has "
                    + tensors.stream().map(TensorConfig::name).toList() + "; declare " + what + " [ { name: \"" + expected + "\" ... } ]");
        }
        TensorConfig t = tensors.getFirst();
        if (t.dataType() != DataType.FP32) {
            throw BackplaneException.invalid("model '" + model + "': " + expected + " is " + t.dataType() + "; FIL's tensors are TYPE_FP32");
        }
        if (t.dims().size() != 1 && (config.batches() || t.dims().size() != 2)) {
            throw BackplaneException.invalid("model '" + model + "': " + expected + " has dims " + t.dims() + "; FIL's tensors have one"
                    + " dimension besides the batch (features, or values per row): dims [ n ] with max_batch_size > 0, [ n ] or [ -1, n ] without");
        }
        return t;
    }

    @Override
    public void close() {
        // nothing backend-wide: natives stay loaded in this plugin's class loader (STYLE 8)
    }

    /** One loaded model version: its engine, shared by its instances, freed (through the guard) once the last prediction left it. */
    static final class FilModel implements Model {
        final String name;
        final ModelConfig config;
        final FilConfig fil;
        final TreeEngine engine;
        final int width;
        final NativeGuard guard;

        FilModel(String name, ModelConfig config, FilConfig fil, TreeEngine engine, int width) {
            this.name = name;
            this.config = config;
            this.fil = fil;
            this.engine = engine;
            this.width = width;
            this.guard = new NativeGuard("fil model '" + name + "'", engine::close);
        }

        @Override
        public ModelInstance createInstance(InstanceContext context) {
            return new FilInstance(this);
        }

        @Override
        public void close() {
            guard.close();
        }
    }
}
