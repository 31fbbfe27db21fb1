package io.backplane.core.repository;

import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The repository and config parser through the real embedded host. */
@Timeout(60)
class RepositoryHostTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private void model(String name, String extra, long... versions) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "%s"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                %s
                """.formatted(name, extra));
        for (long v : versions) {
            Files.writeString(Files.createDirectories(dir.resolve(Long.toString(v))).resolve("weights"), "v" + v);
        }
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(20);
        }
    }

    @Test
    void noneMode_loadsEveryRepositoryModel_withParsedConfigAndServedVersions() throws Exception {
        model("a", "instance_group [ { count: 2 kind: KIND_CPU } ]", 1);
        model("b", "version_policy: { all { } }", 1, 2);
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.NONE).build();

        assertEquals(7, tagOf(host.infer(request("a", 7)).get(10, TimeUnit.SECONDS)));
        assertEquals(8, tagOf(host.infer(request("b", 8)).get(10, TimeUnit.SECONDS)));
        assertTrue(host.isModelReady("b", 1) && host.isModelReady("b", 2));
        ModelConfig a = host.modelConfig("a", 1);
        assertEquals(List.of(TensorConfig.of("IN", DataType.INT64, 1)), a.inputs());
        assertEquals(InstanceKind.CPU, a.instanceGroups().getFirst().kind());
        assertEquals(2, a.instanceCount());
    }

    @Test
    void explicitMode_badConfig_loadFailsNamingFileLineAndField() throws Exception {
        model("bad", "model_repository_agents { }", 1);
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build();
        BackplaneHost h = host;

        BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("bad"));

        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains(repo.resolve("bad/config.pbtxt") + ":5:1: field 'model_repository_agents' is not supported"),
                e.getMessage());
        assertFalse(h.isModelReady("bad"));
    }

    @Test
    void pollMode_addedModelLoads_removedModelUnloads() throws Exception {
        model("first", "", 1);
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.POLL)
                .pollInterval(Duration.ofMillis(50)).build();
        BackplaneHost h = host;
        assertTrue(h.isModelReady("first"));

        model("second", "", 1);
        await(() -> h.isModelReady("second"), "the added model is ready");
        assertEquals(5, tagOf(h.infer(request("second", 5)).get(10, TimeUnit.SECONDS)));

        Files.delete(repo.resolve("first/1/weights"));
        Files.delete(repo.resolve("first/1"));
        Files.delete(repo.resolve("first/config.pbtxt"));
        Files.delete(repo.resolve("first"));
        await(() -> !h.isModelReady("first"), "the removed model is unloaded");
    }

    @Test
    void pollMode_editedConfig_reloadsWithNewConfig() throws Exception {
        model("m", "", 1);
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.POLL)
                .pollInterval(Duration.ofMillis(50)).build();
        BackplaneHost h = host;
        assertTrue(h.modelConfig("m", 1).parameters().isEmpty());

        model("m", "parameters { key: \"k\" value { string_value: \"v\" } }", 1);

        await(() -> {
            try {
                return "v".equals(h.modelConfig("m", 1).parameters().get("k"));
            } catch (BackplaneException e) {
                return false; // between unload and load of the new config
            }
        }, "the edited config is served");
        assertEquals(3, tagOf(h.infer(request("m", 3)).get(10, TimeUnit.SECONDS)));
    }
}
