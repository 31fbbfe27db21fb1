package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ResponseObserver;
import io.backplane.testkit.Await;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The python backend through the real host, from a Triton-layout repository (config.pbtxt). */
class HostEndToEndTest {
    @TempDir
    Path temp;

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    static final String ADD_SUB = """
            name: "add_sub"
            backend: "python"
            input [
              { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
              { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
            ]
            output [
              { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
              { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
            ]
            instance_group [ { kind: KIND_CPU } ]
            """;

    static final String SQUARE = """
            name: "square"
            backend: "python"
            model_transaction_policy { decoupled: true }
            input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            instance_group [ { kind: KIND_CPU } ]
            parameters { key: "heartbeat_interval_ms" value: { string_value: "50" } }
            parameters { key: "heartbeat_timeout_ms" value: { string_value: "400" } }
            """;

    private Path repository() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        for (String[] m : new String[][] {{"add_sub", ADD_SUB}, {"square", SQUARE}}) {
            Path dir = Files.createDirectories(repo.resolve(m[0]).resolve("1"));
            Files.copy(Harness.MODELS.resolve(m[0]).resolve("1/model.py"), dir.resolve("model.py"));
            Files.writeString(repo.resolve(m[0]).resolve("config.pbtxt"), m[1]);
        }
        return repo;
    }

    private static InferenceRequest addSub(float x) {
        return InferenceRequest.builder("add_sub").input(Tensor.ofFloats("INPUT0", new long[] {4}, x, 2, 3, 4))
                .input(Tensor.ofFloats("INPUT1", new long[] {4}, 1, 1, 1, 1)).build();
    }

    private static final class Observer implements ResponseObserver {
        final List<InferenceResponse> responses = new CopyOnWriteArrayList<>();
        final CompletableFuture<BackplaneException> end = new CompletableFuture<>();

        @Override
        public void onResponse(InferenceResponse response) {
            responses.add(response);
        }

        @Override
        public void onComplete() {
            end.complete(null);
        }

        @Override
        public void onError(BackplaneException error) {
            end.complete(error);
        }
    }

    @Test
    void host_addSubAndDecoupledSquare_served() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.NONE).build()) {
            assertTrue(host.isModelReady("add_sub"));
            InferenceResponse r = host.infer(addSub(1)).get(30, TimeUnit.SECONDS);
            assertArrayEquals(new float[] {2, 3, 4, 5}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {0, 1, 2, 3}, r.output("OUTPUT1").toFloatArray());
            Observer o = new Observer();
            host.stream(InferenceRequest.builder("square").input(Tensor.ofInts("IN", new long[] {1}, 4)).build(), o);
            assertEquals(null, o.end.get(30, TimeUnit.SECONDS));
            assertEquals(4, o.responses.size());
            for (InferenceResponse x : o.responses) {
                assertArrayEquals(new int[] {16}, x.output("OUT").toIntArray());
            }
        }
    }

    @Test
    void host_stubKilled_modelNotReadyThenRecoversAndNextSucceeds() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("add_sub").build()) {
            host.infer(addSub(1)).get(30, TimeUnit.SECONDS);
            ProcessHandle stub = Harness.liveStubs().get(0);
            stub.destroyForcibly();
            stub.onExit().get(10, TimeUnit.SECONDS);
            Await.until(() -> host.isModelReady("add_sub") && Harness.liveStubs().stream().anyMatch(p -> p.pid() != stub.pid()),
                    Duration.ofSeconds(60), "a new stub of add_sub to be ready");
            InferenceResponse r = host.infer(addSub(5)).get(30, TimeUnit.SECONDS);
            assertArrayEquals(new float[] {6, 3, 4, 5}, r.output("OUTPUT0").toFloatArray());
        }
    }

    @Test
    void host_unloadWithDecoupledRequestOpen_completesAndFailsItOnce() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository()).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("square").unloadTimeout(Duration.ofSeconds(1)).build()) {
            Observer o = new Observer();
            host.stream(InferenceRequest.builder("square").input(Tensor.ofInts("IN", new long[] {1}, 1_000_000)).build(), o);
            Thread.sleep(300);
            host.unload("square");
            BackplaneException e = o.end.get(30, TimeUnit.SECONDS);
            assertTrue(e != null && e.code() == ErrorCode.UNAVAILABLE, String.valueOf(e));
            assertFalse(host.isModelReady("square"));
            try {
                host.infer(InferenceRequest.builder("square").input(Tensor.ofInts("IN", new long[] {1}, 1)).build()).get(10, TimeUnit.SECONDS);
            } catch (ExecutionException ex) {
                assertTrue(ex.getCause() instanceof BackplaneException);
            }
        }
    }
}
