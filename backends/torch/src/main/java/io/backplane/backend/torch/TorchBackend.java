package io.backplane.backend.torch;

import ai.djl.engine.Engine;
import ai.djl.pytorch.engine.PtEngineProvider;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Backend-wide state of {@code pytorch}: DJL's PyTorch engine (libtorch), started at the first
 * model load. DJL runs offline ({@code ai.djl.offline}: it never downloads) and unpacks libtorch
 * from the {@code pytorch-native-cpu} jar once into a persistent cache folder (see
 * {@link #cacheDirectory}), never into the temporary folder, so a serve leaves nothing behind.
 */
final class TorchBackend implements Backend {
    private static final Logger LOG = LoggerFactory.getLogger(TorchBackend.class);
    /** Backend option ({@code --backend-config=pytorch,cache-dir=/path}): where libtorch is unpacked. */
    static final String CACHE_DIR_OPTION = "cache-dir";

    private final BackendContext context;
    private @Nullable Engine engine;

    TorchBackend(BackendContext context) {
        this.context = context;
    }

    /**
     * The folder DJL unpacks libtorch into (it adds {@code pytorch/<version>-cpu-linux-x86_64}):
     * the backend option {@code cache-dir}, else DJL's own {@code ENGINE_CACHE_DIR} (environment or
     * system property) where set, else {@code $XDG_CACHE_HOME/backplane/djl}, else
     * {@code ~/.cache/backplane/djl}.
     */
    static Path cacheDirectory(BackendContext context) {
        String option = context.options().get(CACHE_DIR_OPTION);
        if (option != null && !option.isBlank()) {
            return Path.of(option);
        }
        String djl = System.getenv("ENGINE_CACHE_DIR");
        if (djl == null || djl.isBlank()) {
            djl = System.getProperty("ENGINE_CACHE_DIR");
        }
        if (djl != null && !djl.isBlank()) {
            return Path.of(djl);
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("backplane").resolve("djl");
    }

    synchronized Engine engine() {
        if (engine == null) {
            Path cache = cacheDirectory(context);
            // DJL reads its settings from system properties only: offline (never download a libtorch) and where to unpack it
            if (System.getProperty("ai.djl.offline") == null) {
                System.setProperty("ai.djl.offline", "true");
            }
            System.setProperty("ENGINE_CACHE_DIR", cache.toAbsolutePath().toString());
            try {
                engine = new PtEngineProvider().getEngine();
            } catch (RuntimeException | LinkageError e) {
                throw new BackplaneException(ErrorCode.INTERNAL, "backend '" + context.backendName() + "' could not start libtorch (DJL "
                        + Engine.getDjlVersion() + ", cache " + cache + "): " + e + "; check that lib/ holds pytorch-jni and pytorch-native-cpu"
                        + " (linux-x86_64) and that the cache folder is writable", e);
            }
            LOG.info("backend '{}': libtorch {} through DJL {}, natives in {}", context.backendName(), engine.getVersion(), Engine.getDjlVersion(),
                    cache.resolve("pytorch"));
        }
        return engine;
    }

    @Override
    public Model loadModel(ModelContext ctx) throws Exception {
        ModelConfig config = ctx.config();
        if (config.decoupled()) {
            throw unsupported(ctx, "decoupled: true (a TorchScript forward() answers each request once)");
        }
        for (InstanceGroup g : config.instanceGroups()) {
            if (g.kind() == InstanceKind.GPU) {
                throw unsupported(ctx, "instance_group kind KIND_GPU (this build runs libtorch on the CPU; use KIND_CPU)");
            }
        }
        if (config.outputs().isEmpty()) {
            throw BackplaneException.invalid("model '" + ctx.name() + "': declare its outputs in config.pbtxt (OUTPUT__0, OUTPUT__1, ... by the"
                    + " position of each tensor in forward()'s result); a TorchScript file does not describe them");
        }
        for (TensorConfig t : config.inputs()) {
            checkType(ctx, "input", t);
        }
        for (TensorConfig t : config.outputs()) {
            checkType(ctx, "output", t);
        }
        String fileName = config.defaultModelFilename().isEmpty() ? "model.pt" : config.defaultModelFilename();
        Path file = ctx.checkedFile(ctx.versionDirectory().resolve(fileName), "default_model_filename");
        if (!Files.isRegularFile(file)) {
            // INVALID_ARGUMENT, not NOT_FOUND: the model exists, its files are incomplete (NOT_FOUND would answer 404 "no such model")
            throw BackplaneException.invalid("model '" + ctx.name() + "' version " + ctx.version() + ": no TorchScript file " + file
                    + "; save one with torch.jit.save (or name another file with default_model_filename)");
        }
        Optional<List<String>> args = ForwardSignature.read(file);
        Bindings bindings = Bindings.of(ctx.name(), config, args, LOG);
        TorchSettings settings = TorchSettings.of(ctx.name(), config.parameters(), LOG);
        Engine e = engine();
        if (settings.interOpThreads() > 0) {
            TorchModel.interOpThreads(ctx.name(), settings.interOpThreads(), LOG);
        }
        TorchModel model = new TorchModel(ctx.name(), config, file, bindings, settings, e);
        LOG.info("model '{}' version {}: {} on libtorch {}, inputs by {}{}", ctx.name(), ctx.version(), file.getFileName(), e.getVersion(),
                bindings.how(), settings.optimizedExecution() ? "" : ", optimized execution off");
        return model;
    }

    private static void checkType(ModelContext ctx, String what, TensorConfig t) {
        if (TorchTypes.toDjl(t.dataType()) == null) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "model '" + ctx.name() + "' " + what + " '" + t.name() + "' is " + t.dataType()
                    + ", which the pytorch backend cannot exchange with libtorch; use one of " + TorchTypes.SUPPORTED);
        }
    }

    private BackplaneException unsupported(ModelContext ctx, String what) {
        return new BackplaneException(ErrorCode.UNSUPPORTED, "backend '" + context.backendName() + "' cannot serve model '" + ctx.name()
                + "': it does not support " + what);
    }

    @Override
    public void close() {
        // libtorch stays loaded: a JNI library cannot be unloaded while its class loader lives; models free their modules
    }
}
