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
import io.backplane.spi.InferenceRequest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a Triton user meets first in explicit model control: Triton's sentences for an unknown or
 * unavailable model and for a bad model name, {@code unload_dependents}, strict readiness and the
 * server name.
 */
@Timeout(60)
class ModelControlTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();

    @AfterEach
    void hygiene() {
        Hygiene.assertNoBackplaneThreads();
    }

    private void model(String name) throws IOException {
        Path dir = repo.resolve(name);
        Files.createDirectories(dir.resolve("1"));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "%s"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                """.formatted(name));
    }

    private void ensemble(String name, String step) throws IOException {
        Path dir = repo.resolve(name);
        Files.createDirectories(dir.resolve("1"));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "%s"
                platform: "ensemble"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                ensemble_scheduling { step [ { model_name: "%s" model_version: -1 input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } } ] }
                """.formatted(name, step));
    }

    private BackplaneHost explicitHost(BackplaneHost.Builder b) {
        return b.modelRepository(repo).backend(backend.on("a", ScriptedBackend.ECHO).on("b", ScriptedBackend.ECHO))
                .modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5)).build();
    }

    private static BackplaneException failure(BackplaneHost host, String model, long version) {
        InferenceRequest r = request(model, 1);
        InferenceRequest req = version == InferenceRequest.LATEST ? r : r.toBuilder().version(version).build();
        ExecutionException e = assertThrows(ExecutionException.class, () -> host.infer(req).get(5, TimeUnit.SECONDS));
        return assertInstanceOf(BackplaneException.class, e.getCause());
    }

    @Test
    void infer_unknownModelOrVersion_tritonSentenceFirst() throws Exception {
        model("a");
        model("b");
        try (BackplaneHost host = explicitHost(BackplaneHost.builder())) {
            host.load("a");
            BackplaneException unknown = failure(host, "nope", InferenceRequest.LATEST);
            assertEquals(ErrorCode.NOT_FOUND, unknown.code());
            assertTrue(unknown.getMessage().startsWith("Request for unknown model: 'nope' is not found; loaded models: [a]"), unknown.getMessage());

            BackplaneException version = failure(host, "a", 7);
            assertEquals(ErrorCode.NOT_FOUND, version.code());
            assertTrue(version.getMessage().startsWith("Request for unknown model: 'a' version 7 is not found; loaded versions: [1]"),
                    version.getMessage());

            BackplaneException notLoaded = failure(host, "b", InferenceRequest.LATEST);
            assertEquals(ErrorCode.UNAVAILABLE, notLoaded.code());
            assertTrue(notLoaded.getMessage().startsWith("Request for unknown model: 'b' is not found; it is in the model repository"),
                    notLoaded.getMessage());

            host.unload("a");
            BackplaneException unloaded = failure(host, "a", InferenceRequest.LATEST);
            assertEquals(ErrorCode.UNAVAILABLE, unloaded.code());
            assertEquals("Request for unknown model: 'a' has no available versions; it is not loaded", unloaded.getMessage());
            host.load("a");
            assertEquals(3, tagOf(host.infer(request("a", 3)).get(5, TimeUnit.SECONDS)), "the host keeps serving");
        }
    }

    @Test
    void load_badModelName_tritonMessage() throws Exception {
        model("a");
        try (BackplaneHost host = explicitHost(BackplaneHost.builder())) {
            assertEquals("model name must not be empty; name the model's folder in the repository",
                    assertThrows(BackplaneException.class, () -> host.load("")).getMessage());
            assertTrue(assertThrows(BackplaneException.class, () -> host.load(" \t")).getMessage()
                    .startsWith("model name must not contain only whitespace characters"));
            for (String bad : new String[] {"../a", "a/b", "x..y"}) {
                BackplaneException e = assertThrows(BackplaneException.class, () -> host.load(bad));
                assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
                assertTrue(e.getMessage().startsWith("invalid model name '" + bad + "', model name must not contain path traversal characters"),
                        e.getMessage());
            }
            // Every other character is accepted, as in Triton: an unknown name is then just not in the repository.
            BackplaneException missing = assertThrows(BackplaneException.class, () -> host.load("a b+c@d"));
            assertEquals(ErrorCode.NOT_FOUND, missing.code(), missing.getMessage());
            host.load("a");
            assertTrue(host.isModelReady("a"));
        }
    }

    @Test
    void unloadDependents_unloadsComposingModelsLoadedOnlyForTheEnsemble() throws Exception {
        model("a");
        model("b");
        ensemble("ens_a", "a");
        ensemble("ens_b", "b");
        ensemble("ens_b2", "b");
        try (BackplaneHost host = explicitHost(BackplaneHost.builder())) {
            host.load("ens_a");
            assertTrue(host.isModelReady("a"), "a composing model loads with its ensemble");
            host.unload("ens_a", true);
            assertFalse(host.isModelReady("ens_a"));
            assertFalse(host.isModelReady("a"), "unload_dependents unloads the composing model loaded for it");

            host.load("a");
            host.load("ens_a");
            host.unload("ens_a", true);
            assertTrue(host.isModelReady("a"), "a model loaded on its own stays");

            host.load("ens_b");
            host.load("ens_b2");
            host.unload("ens_b", true);
            assertTrue(host.isModelReady("b"), "a composing model another loaded ensemble uses stays");
            host.unload("ens_b2", true);
            assertFalse(host.isModelReady("b"));

            host.load("ens_b");
            host.unload("ens_b");
            assertTrue(host.isModelReady("b"), "without unload_dependents the composing model stays");
        }
    }

    @Test
    void strictReadiness_followsModelReadiness_orOnlyTheHostWhenOff() throws Exception {
        model("a");
        for (boolean strict : new boolean[] {true, false}) {
            backend.ready = true;
            try (BackplaneHost host = explicitHost(BackplaneHost.builder().strictReadiness(strict).serverName("triton"))) {
                assertEquals("triton", host.serverName());
                host.load("a");
                assertTrue(host.isReady());
                backend.ready = false;
                assertFalse(host.isModelReady("a"), "the model's readiness is its instances'");
                assertEquals(!strict, host.isReady(), "strict=" + strict);
                backend.ready = true;
                assertTrue(host.isModelReady("a"));
                assertTrue(host.isReady());
            }
        }
        try (BackplaneHost host = explicitHost(BackplaneHost.builder())) {
            assertEquals("backplane", host.serverName());
        }
        assertThrows(IllegalArgumentException.class, () -> BackplaneHost.builder().serverName(" "));
    }
}
