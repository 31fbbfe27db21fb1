package io.backplane.core.repository;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.internal.ModelRegistry;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.LoadOverride;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * A model whose version folder is missing fails its load with INVALID_ARGUMENT (not NOT_FOUND, which
 * clients read as "no such model"), and the server's log has it at ERROR with the model and the path:
 * the operator reading the log, not only the client that asked, learns what to fix.
 */
class MissingVersionFolderTest {
    @TempDir
    Path temp;

    private final ScriptedBackend backend = new ScriptedBackend();
    private final Logger registryLog = (Logger) LoggerFactory.getLogger(ModelRegistry.class);
    private final ListAppender<ILoggingEvent> logged = new ListAppender<>();
    private @Nullable Level registryLevel;
    private @Nullable BackplaneHost host;
    private Path repo;

    @BeforeEach
    void setUp() throws IOException {
        repo = Files.createDirectories(temp.resolve("repo"));
        registryLevel = registryLog.getLevel();
        registryLog.setLevel(Level.INFO);
        logged.start();
        registryLog.addAppender(logged);
    }

    @AfterEach
    void tearDown() {
        registryLog.detachAppender(logged);
        registryLog.setLevel(registryLevel);
        if (host != null) {
            host.close();
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private static String config(String name, String extra) {
        return """
                name: "%s"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                %s
                """.formatted(name, extra);
    }

    private BackplaneHost explicitHost() {
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build();
        return host;
    }

    private List<ILoggingEvent> errors() {
        return logged.list.stream().filter(e -> e.getLevel() == Level.ERROR).toList();
    }

    private void assertLoggedAtError(String model, Path where) {
        assertTrue(errors().stream().anyMatch(e -> e.getFormattedMessage().contains(model)
                && e.getFormattedMessage().contains(where.toString())), "an ERROR line naming model '" + model + "' and " + where + ": " + logged.list);
    }

    @Test
    void load_noVersionFolder_invalidArgument_loggedAtErrorWithModelAndPath() throws IOException {
        Path dir = Files.createDirectories(repo.resolve("empty"));
        Files.writeString(dir.resolve("config.pbtxt"), config("empty", ""));
        BackplaneHost h = explicitHost();

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("empty"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains(dir.toString()), e.getMessage());
        assertLoggedAtError("empty", dir);
    }

    @Test
    void load_specificVersionWithoutFolder_invalidArgument_loggedAtErrorWithModelAndPath() throws IOException {
        Path dir = Files.createDirectories(repo.resolve("pinned"));
        Files.writeString(dir.resolve("config.pbtxt"), config("pinned", "version_policy: { specific: { versions: [ 3 ] } }"));
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve("weights"), "v1");
        BackplaneHost h = explicitHost();

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("pinned"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertLoggedAtError("pinned", dir);
    }

    @Test
    void loadWithConfig_policySelectsNoFolder_invalidArgument_loggedAtErrorWithModelAndPath() throws IOException {
        Path dir = Files.createDirectories(repo.resolve("overridden"));
        Files.writeString(dir.resolve("config.pbtxt"), config("overridden", ""));
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve("weights"), "v1");
        BackplaneHost h = explicitHost();
        String json = """
                {"name": "overridden", "backend": "scripted", "version_policy": {"specific": {"versions": [7]}},
                 "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
                 "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [1]}]}
                """;

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("overridden", new LoadOverride(json, Map.of())));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertLoggedAtError("overridden", dir);
    }
}
