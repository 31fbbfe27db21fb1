package io.backplane.backend.python;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Backend-wide state: the unpacked stub sources, a private directory for control sockets, and
 * the host options. Reaps shared-memory files of dead hosts when created.
 */
final class PythonBackend implements Backend {
    private static final Logger log = LoggerFactory.getLogger(PythonBackend.class);
    static final List<String> STUB_FILES = List.of("backplane_stub.py", "backplane_wire.py", "backplane_channel.py",
            "backplane_shm.py", "backplane_codec.py", "triton_python_backend_utils.py", "backplane_execute.py", "backplane_dlpack.py",
            "backplane_model_config.py", "backplane_bls.py", "backplane_readiness.py", "backplane_template.py");

    /** The prefix of the socket folders, marked with their owner ({@link OwnedDirectory}). */
    static final String SOCKET_PREFIX = "bp-py-";

    private final Map<String, String> options;
    private final Path stubDirectory;
    private final Path socketDirectory;
    private final ExecutionEnvironments environments;

    private PythonBackend(Map<String, String> options, Path stubDirectory, Path socketDirectory) {
        this.options = options;
        this.stubDirectory = stubDirectory;
        this.socketDirectory = socketDirectory;
        this.environments = new ExecutionEnvironments(stubDirectory.resolve("envs"));
    }

    static PythonBackend create(BackendContext context) throws IOException {
        return create(context.options(), context.workDirectory());
    }

    static PythonBackend create(Map<String, String> options, Path workDirectory) throws IOException {
        StubSettings.checkBackendOptions(options);
        StubSettings.resolve(options, Map.of());
        List<String> stale = SharedRegion.reapStale();
        if (!stale.isEmpty()) {
            log.info("removed {} stale shared-memory file(s) left by dead hosts: {}", stale.size(), stale);
        }
        var owner = PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"));
        Path stubs = Files.createTempDirectory(workDirectory, "python-stub-", owner);
        for (String f : STUB_FILES) {
            try (InputStream in = PythonBackend.class.getResourceAsStream("stub/" + f)) {
                if (in == null) {
                    throw new BackplaneException(ErrorCode.INTERNAL, "the python backend jar lacks stub/" + f);
                }
                Files.copy(in, stubs.resolve(f));
            }
        }
        // Unix socket paths are limited to ~107 bytes: keep them short, in a private directory
        // (under /tmp when java.io.tmpdir is too deep for "<dir>/bp-py-<20 digits>/g<n>-<12 hex>.sock").
        Path tmp = Path.of(System.getProperty("java.io.tmpdir")).toAbsolutePath();
        Path socketParent = tmp.toString().length() > 56 ? Path.of("/tmp") : tmp;
        List<Path> reaped = OwnedDirectory.reapStale(socketParent, SOCKET_PREFIX);
        if (!reaped.isEmpty()) {
            log.info("removed {} socket folder(s) left by dead hosts: {}", reaped.size(), reaped);
        }
        Path sockets = OwnedDirectory.create(socketParent, SOCKET_PREFIX, owner);
        return new PythonBackend(Map.copyOf(options), stubs, sockets);
    }

    Map<String, String> options() {
        return options;
    }

    Path stubDirectory() {
        return stubDirectory;
    }

    Path socketDirectory() {
        return socketDirectory;
    }

    /**
     * The stub settings of a model: backend options overridden by its parameters, and the
     * interpreter of its execution environment ({@code EXECUTION_ENV_PATH}) when it names one, the
     * path checked by the host ({@link ModelContext#checkedFile}).
     */
    StubSettings settingsFor(ModelContext context, ModelConfig config) {
        StubSettings s = StubSettings.resolve(options, config.parameters());
        Path python = environments.interpreter(context, config.parameters());
        return python == null ? s : s.withInterpreter(python.toString());
    }

    @Override
    public ModelConfig autoCompleteConfig(ModelContext context) {
        return AutoComplete.complete(this, context);
    }

    @Override
    public Model loadModel(ModelContext context) {
        return new PythonModel(this, context);
    }

    @Override
    public void close() {
        // Stubs whose clean-up is still running (an instance close abandoned after its deadline): their process groups now,
        // before the host ends and leaves what their models started running (R3).
        int killed = ProcessGroup.killAll(socketDirectory);
        if (killed > 0) {
            log.warn("killed the process groups of {} python stub(s) still running at close, with whatever their models started", killed);
        }
        StubLauncher.closeAll(socketDirectory);
        int unlinked = SharedRegion.unlinkAll(socketDirectory);
        if (unlinked > 0) {
            log.warn("removed the shared-memory files of {} stub(s) whose clean-up was still running at close", unlinked);
        }
        deleteTree(socketDirectory);
        deleteTree(stubDirectory);
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    log.debug("cannot delete {}", p, e);
                }
            });
        } catch (IOException e) {
            log.debug("cannot delete {}", dir, e);
        }
    }
}
