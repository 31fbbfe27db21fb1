package io.backplane.core.lifecycle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.internal.ModelRegistry;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.WarmupModel;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.HostListener;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * R1 with warm-from-the-first-request kept: the host warms a backend's shared request path with
 * the backend's own {@link WarmupModel}, never with a user model, before {@code build()} returns,
 * bounded by its budget, and leaves no trace: not in the index, statistics, listeners, nor a model
 * or folder left loaded.
 */
@Timeout(60)
class OwnWarmupTest {
    @TempDir
    Path repo;

    private final ScriptedBackend backend = new ScriptedBackend();
    private final List<ScheduledRequest> user = new CopyOnWriteArrayList<>();
    private final List<ScheduledRequest> own = new CopyOnWriteArrayList<>();
    private final List<String> events = new CopyOnWriteArrayList<>();
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
            assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance closed");
            assertEquals(backend.modelsLoaded.get(), backend.modelsClosed.get(), "every model closed");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    private static final String OWN = ModelRegistry.OWN_WARMUP_PREFIX + ScriptedBackend.NAME;

    private BackplaneHost start(Duration budget, boolean withOwnModel) throws Exception {
        Path dir = Files.createDirectories(repo.resolve("counts"));
        Files.writeString(dir.resolve("config.pbtxt"), "name: \"counts\"\nbackend: \"scripted\"\n"
                + "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n");
        Files.createDirectories(dir.resolve("1"));
        backend.on("counts", (batch, inst) -> {
            user.addAll(batch);
            batch.forEach(r -> r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN").withName("OUT")))));
        });
        backend.on(OWN, (batch, inst) -> {
            own.addAll(batch);
            assertTrue(Files.exists(inst.model().modelDirectory().resolve("1").resolve("own.txt")), "the warm-up model's files are in its version folder");
            batch.forEach(r -> r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("X").withName("Y")))));
        });
        backend.warmupModel = !withOwnModel ? null : new WarmupModel(ModelConfig.builder("own").backend(ScriptedBackend.NAME)
                    .input(TensorConfig.of("X", DataType.FP32, 4)).output(TensorConfig.of("Y", DataType.FP32, 4)).build(),
                    Map.of("own.txt", "the backend's own".getBytes(StandardCharsets.UTF_8)));
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.NONE).builtinWarmup(true)
                .ownWarmup(budget).listener(new HostListener() {
                    @Override
                    public void versionLoaded(String model, long version) {
                        events.add("loaded " + model);
                    }

                    @Override
                    public void requestAccepted(String model, long version) {
                        events.add("accepted " + model);
                    }

                    @Override
                    public void batchExecuted(String model, long version, int requests, int batchSize) {
                        events.add("batch " + model);
                    }
                }).build();
        return host;
    }

    @Test
    void ownModelWarmsThePath_beforeBuildReturns_userModelsReceiveNothing_andNoTraceIsLeft() throws Exception {
        BackplaneHost h = start(Duration.ofMillis(300), true);

        assertFalse(own.isEmpty(), "the backend's own model was sent requests before build returned");
        assertTrue(own.stream().allMatch(r -> r.request().input("X").shape()[0] == 4), "zeros shaped from its config");
        assertEquals(0, user.size(), "a user model (its backend does not declare its execute free of side effects) received a request");
        assertTrue(h.isModelReady("counts"));
        assertEquals(List.of("counts"), h.repositoryIndex().stream().map(s -> s.name()).toList(), "the warm-up model is not in the index");
        assertFalse(h.isModelReady(OWN), "no client can reach it");
        assertTrue(events.stream().noneMatch(e -> e.contains(OWN)), "no listener event of it: " + events);
        assertEquals(backend.modelsLoaded.get() - 1, backend.modelsClosed.get(), "it was unloaded; only the user model stays loaded");
    }

    @Test
    void offOrNoOwnModel_warmsNothing_andStillSendsUserModelsNothing() throws Exception {
        start(Duration.ZERO, true);
        assertEquals(0, own.size(), "switched off");
        assertEquals(0, user.size());
        host.close();
        host = null;
        BackplaneHost h = start(Duration.ofMillis(300), false);
        assertEquals(0, own.size(), "the backend ships no warm-up model");
        assertEquals(0, user.size());
        assertTrue(h.isModelReady("counts"));
    }
}
