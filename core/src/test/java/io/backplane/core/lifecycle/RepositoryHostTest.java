package io.backplane.core.lifecycle;

import static io.backplane.core.testing.ScriptedBackend.request;
import static io.backplane.core.testing.ScriptedBackend.tagOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The host over real repository folders: control modes none, explicit and poll; bad configs. */
@Timeout(60)
class RepositoryHostTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();

    @AfterEach
    void hygiene() {
        Hygiene.assertNoBackplaneThreads();
    }

    private void model(String name, String extra, long... versions) throws IOException {
        Path dir = repo.resolve(name);
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "%s"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                %s
                """.formatted(name, extra));
        for (long v : versions) {
            Files.createDirectories(dir.resolve(Long.toString(v)));
        }
    }

    @Test
    void noneMode_loadsEverything_aBrokenModelIsUnavailableAndOthersServe() throws Exception {
        model("good", "", 1);
        model("bad", "max_batch_size: -3", 1);
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).backend(backend).build()) {
            assertEquals(7, tagOf(host.infer(request("good", 7)).get(5, TimeUnit.SECONDS)));
            ExecutionException e = assertThrows(ExecutionException.class, () -> host.infer(request("bad", 1)).get(5, TimeUnit.SECONDS));
            BackplaneException be = assertInstanceOf(BackplaneException.class, e.getCause());
            assertEquals(ErrorCode.UNAVAILABLE, be.code());
            assertTrue(be.getMessage().contains("config.pbtxt"), be.getMessage());
            List<ModelStatus> index = host.repositoryIndex();
            assertTrue(index.stream().anyMatch(s -> s.name().equals("good") && s.state() == ModelState.READY), index.toString());
            assertTrue(index.stream().anyMatch(s -> s.name().equals("bad") && s.state() == ModelState.UNAVAILABLE), index.toString());
            assertThrows(BackplaneException.class, () -> host.unload("good"), "no unload in NONE mode");
            assertFalse(host.isReady(), "strict readiness: a model that failed to load makes the host not ready");
            assertTrue(host.isLive());
        }
    }

    @Test
    void explicitMode_loadsOnlyWhatIsAsked_andABrokenLoadNamesFileAndLine() throws Exception {
        model("a", "", 1);
        model("b", "dynamic_batching { bogus_field: 1 }", 1);
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).backend(backend).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("a").build()) {
            assertTrue(host.isModelReady("a"));
            assertFalse(host.isModelReady("b"));
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("b"));
            assertTrue(e.getMessage().contains("config.pbtxt:5"), e.getMessage());
            BackplaneException unknown = assertThrows(BackplaneException.class, () -> host.load("zzz"));
            assertEquals(ErrorCode.NOT_FOUND, unknown.code());
            assertTrue(host.isModelReady("a"));
            host.unload("a");
            assertFalse(host.isModelReady("a"));
        }
    }

    @Test
    void versionPolicy_servesTheNewestByDefault_andNamedVersionsRoute() throws Exception {
        model("v", "version_policy: { all: {} }", 1, 2, 3);
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).backend(backend).build()) {
            assertEquals(List.of(1L, 2L, 3L), host.metadata("v").versions());
            assertEquals(3, host.infer(request("v", 5)).get(5, TimeUnit.SECONDS).modelVersion());
            var r = host.infer(io.backplane.spi.InferenceRequest.builder("v").version(2)
                    .input(io.backplane.spi.Tensor.ofLongs("IN", new long[] {1}, 5)).build()).get(5, TimeUnit.SECONDS);
            assertEquals(2, r.modelVersion());
            ExecutionException e = assertThrows(ExecutionException.class, () -> host.infer(io.backplane.spi.InferenceRequest.builder("v").version(9)
                    .input(io.backplane.spi.Tensor.ofLongs("IN", new long[] {1}, 5)).build()).get(5, TimeUnit.SECONDS));
            assertTrue(e.getCause().getMessage().contains("'v' version 9 is not found"), e.getCause().getMessage());
        }
    }

    @Test
    void pollMode_loadsNewModels_reloadsChanged_unloadsRemoved() throws Exception {
        model("p", "", 1);
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).backend(backend).modelControlMode(ModelControlMode.POLL)
                .pollInterval(Duration.ofMillis(50)).build()) {
            assertTrue(host.isModelReady("p"));
            model("q", "", 1);
            awaitTrue(() -> host.isModelReady("q"));
            Files.createDirectories(repo.resolve("p").resolve("2"));
            awaitTrue(() -> host.isModelReady("p", 2));
            assertEquals(2, host.infer(request("p", 1)).get(5, TimeUnit.SECONDS).modelVersion());
            deleteTree(repo.resolve("q"));
            awaitTrue(() -> !host.isModelReady("q"));
        }
    }

    private static void awaitTrue(java.util.function.BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("condition not reached within 10 s");
            }
            Thread.sleep(20);
        }
    }

    private static void deleteTree(Path p) throws IOException {
        try (var s = Files.walk(p)) {
            for (Path x : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(x);
            }
        }
    }
}
