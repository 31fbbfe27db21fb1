package io.backplane.core.repository;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Triton's {@code --load-model=*} (its QA L0_http starts so): every model of the repository in EXPLICIT mode, then load/unload on request. */
class LoadAllModelsTest {
    @TempDir
    Path repo;

    @Test
    void explicitMode_loadModelStar_loadsEveryModel_thenUnloadOnRequest() throws Exception {
        for (String name : new String[] {"a", "b"}) {
            Path dir = Files.createDirectories(repo.resolve(name).resolve("1")).getParent();
            Files.writeString(dir.resolve("config.pbtxt"), """
                    backend: "scripted"
                    input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                    output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                    """);
        }
        ScriptedBackend backend = new ScriptedBackend();
        try (BackplaneHost host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel(ModelControlMode.ALL_MODELS).build()) {
            assertTrue(host.isModelReady("a"));
            assertTrue(host.isModelReady("b"));
            host.unload("a");
            assertFalse(host.isModelReady("a"), "explicit mode: unloaded on request");
            assertEquals(7L, ScriptedBackend.tagOf(host.infer(ScriptedBackend.request("b", 7)).get()));
        }
        assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        Hygiene.assertNoBackplaneThreads();
    }
}
