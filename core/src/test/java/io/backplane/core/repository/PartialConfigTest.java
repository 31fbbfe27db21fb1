package io.backplane.core.repository;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
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

/**
 * A config that names neither a backend nor a platform is completed from the model's files, as
 * Triton's auto-complete does: Triton's {@code simple_grpc_model_control} example loads {@code simple}
 * with the override {@code {"max_batch_size":"16"}} and expects the model served with it. Where no
 * file tells the backend, the load still fails naming what to add.
 */
class PartialConfigTest {
    private static final String IO = """
            "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
            "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [1]}]""";

    @TempDir
    Path temp;

    private final ScriptedBackend backend = new ScriptedBackend();
    private @Nullable BackplaneHost host;
    private Path repo;

    @BeforeEach
    void setUp() throws IOException {
        repo = Files.createDirectories(temp.resolve("repo"));
        backend.modelFileNames = List.of("model.scripted");
    }

    @AfterEach
    void tearDown() {
        if (host != null) {
            host.close();
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private BackplaneHost explicitHost() {
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build();
        return host;
    }

    private Path model(String name, String modelFile) throws IOException {
        Path dir = Files.createDirectories(repo.resolve(name));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "%s"
                backend: "scripted"
                max_batch_size: 8
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                """.formatted(name));
        Files.writeString(Files.createDirectories(dir.resolve("1")).resolve(modelFile), "weights");
        return dir;
    }

    @Test
    void loadWithOverride_noBackend_completedFromTheModelFile_andServed() throws Exception {
        model("simple", "model.scripted");
        BackplaneHost h = explicitHost();
        h.load("simple");
        assertEquals(8, h.modelConfig("simple", 1).maxBatchSize());

        h.load("simple", new LoadOverride("{\"max_batch_size\": \"16\", " + IO + "}", Map.of()));

        assertEquals(16, h.modelConfig("simple", 1).maxBatchSize());
        assertEquals("scripted", h.modelConfig("simple", 1).backend());
        InferenceRequest batchOfOne = InferenceRequest.builder("simple").input(Tensor.ofLongs("IN", new long[] {1, 1}, 7)).build();
        assertEquals(7L, ScriptedBackend.tagOf(h.infer(batchOfOne).get()));
    }

    @Test
    void configFile_noBackend_completedFromTheModelFile() throws Exception {
        Path dir = model("partial", "model.scripted");
        Files.writeString(dir.resolve("config.pbtxt"), """
                max_batch_size: 4
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                """);
        BackplaneHost h = explicitHost();

        h.load("partial");

        assertEquals("scripted", h.modelConfig("partial", 1).backend());
        assertEquals(4, h.modelConfig("partial", 1).maxBatchSize());
    }

    @Test
    void loadWithOverride_noBackend_noKnownModelFile_invalidArgumentNamingWhatToAdd() throws Exception {
        model("opaque", "weights.bin");
        BackplaneHost h = explicitHost();

        BackplaneException e = assertThrows(BackplaneException.class,
                () -> h.load("opaque", new LoadOverride("{\"max_batch_size\": \"16\", " + IO + "}", Map.of())));

        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("names neither a backend nor a platform"), e.getMessage());
        assertTrue(e.getMessage().contains("backend: \"python\""), e.getMessage());
    }
}
