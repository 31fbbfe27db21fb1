package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * R1 for Python models (SCENARIOS 18): with every warm-up the host has switched on, a model that
 * counts its requests, one that raises on zeros and a decoupled one that keeps its sender receive
 * nothing at load, and the load is not held up by them (the built-in warm-up used to hold the
 * decoupled one for 120 s, past this class's limit); the backend's own model warmed the shared path
 * instead, in a stub of its own that is gone afterwards.
 */
@Timeout(90)
class PythonWarmupTest {
    @TempDir
    Path repo;

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
        StubForkTest.assertNoTemplates();
    }

    private void model(String name, String config, String modelPy) throws Exception {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), "name: \"" + name + "\"\nbackend: \"python\"\n" + config);
        Files.writeString(dir.resolve("model.py"), modelPy);
    }

    @Test
    void userModelsWithSideEffects_receiveNothingAtLoad_whileTheBackendsOwnModelWarmsThePath() throws Exception {
        Path ledger = repo.resolve("ledger.txt");
        String io = "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";
        model("counts", "max_batch_size: 4\n" + io, """
                import triton_python_backend_utils as pb_utils
                class TritonPythonModel:
                    def execute(self, requests):
                        with open(%s, "a") as f:  # a side effect: a write somewhere else
                            f.write("%%d\\n" %% len(requests))
                        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]) for r in requests]
                """.formatted("'" + ledger + "'"));
        model("raises_on_zeros", io, """
                import triton_python_backend_utils as pb_utils
                class TritonPythonModel:
                    def execute(self, requests):
                        for r in requests:
                            if not pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().any():
                                raise ValueError("zeros are not an input of this model")
                        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]) for r in requests]
                """);
        model("keeps_sender", "model_transaction_policy { decoupled: true }\n" + io, """
                import triton_python_backend_utils as pb_utils
                class TritonPythonModel:
                    def initialize(self, args):
                        self.kept = []
                    def execute(self, requests):
                        for r in requests:
                            self.kept.append(r.get_response_sender())  # answers later, or never
                        return None
                """);
        long forksBefore = StubLauncher.allTemplates().stream().mapToLong(StubTemplate::forkRequests).sum();
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).builtinWarmup(true)
                .ownWarmup(Duration.ofMillis(500)).backendOption("python", StubSettings.HEARTBEAT_TIMEOUT, "10000").build()) {
            assertTrue(host.isModelReady("counts") && host.isModelReady("raises_on_zeros") && host.isModelReady("keeps_sender"));
            assertFalse(Files.exists(ledger), "a user model received a request at load");
            List<StubTemplate> templates = StubLauncher.allTemplates();
            assertEquals(1, templates.size(), "one template: " + templates);
            assertEquals(4, templates.get(0).forkRequests() - forksBefore, "three user stubs and the backend's own warm-up stub were forked");
            assertEquals(3, Harness.liveStubs().size(), "the warm-up stub is gone; the three user stubs serve");
            assertEquals(List.of("counts", "keeps_sender", "raises_on_zeros"), host.repositoryIndex().stream().map(s -> s.name()).sorted().toList());

            InferenceResponse r = host.infer(InferenceRequest.builder("counts").input(Tensor.ofFloats("IN", new long[] {1, 2}, 3, 4)).build())
                    .get(30, TimeUnit.SECONDS);
            assertEquals(List.of("1"), Files.readAllLines(ledger), "the first request the model sees is the client's");
            assertEquals(1, host.statistics("counts", 1).getFirst().success().count());
            assertTrue(r.output("OUT") != null);
        }
    }

    @Test
    void theBackendsOwnModel_answersItsZerosWithThemselves() throws Exception {
        io.backplane.spi.WarmupModel own = new PythonBackendFactory().capabilities().warmupModel().orElseThrow();
        try (io.backplane.testkit.ModelHarness h = io.backplane.testkit.ModelHarness.builder(new PythonBackendFactory()).model(own.config())
                .versionFile("model.py", own.versionFiles().get("model.py")).backendOptions(Harness.FAST).start()) {
            float[] x = new float[16];
            x[3] = 7;
            InferenceResponse r = h.infer(InferenceRequest.builder(own.config().name()).input(Tensor.ofFloats("IN", new long[] {1, 16}, x)).build());
            assertFalse(r.isError(), r::toString);
            org.junit.jupiter.api.Assertions.assertArrayEquals(x, r.output("OUT").toFloatArray());
        }
    }

    /**
     * Issue 33 item 9 (Triton's response_sender_complete_final_test): with the warm-ups that
     * {@code backplane serve} switches on, a decoupled model that sends its response with
     * COMPLETE_FINAL and then sends again records nothing before the client's request (no request
     * reached it at load), and then records that the second send raised Triton's exact text; the
     * client gets the one response.
     */
    @Test
    void sendAfterCompleteFinal_raisesTritonsText_andNothingReachedTheModelBefore() throws Exception {
        Path marks = repo.resolve("marks.txt");
        model("complete_final", "max_batch_size: 8\nmodel_transaction_policy { decoupled: true }\n"
                + "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\noutput [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n", """
                import triton_python_backend_utils as pb_utils
                class TritonPythonModel:
                    def execute(self, requests):
                        for request in requests:
                            sender = request.get_response_sender()
                            response = pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy())])
                            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                            try:
                                sender.send(response)
                                mark = "no exception"
                            except pb_utils.TritonModelException as e:
                                mark = "raised: " + str(e)
                            with open(%s, "a") as f:
                                f.write(mark + "\\n")
                        return None
                """.formatted("'" + marks + "'"));
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).builtinWarmup(true)
                .ownWarmup(Duration.ofMillis(500)).backendOption("python", StubSettings.HEARTBEAT_TIMEOUT, "10000").build()) {
            assertTrue(host.isModelReady("complete_final"));
            assertFalse(Files.exists(marks), "a request reached the model at load");
            Streamed.Result r = Streamed.collect(host, InferenceRequest.builder("complete_final")
                    .input(Tensor.ofFloats("INPUT0", new long[] {1, 1}, 123.45f)).build(), 30);
            assertEquals(null, r.error());
            List<InferenceResponse> got = r.responses();
            assertEquals(1, got.size(), "one response reaches the client");
            org.junit.jupiter.api.Assertions.assertArrayEquals(new float[] {123.45f}, got.get(0).output("OUTPUT0").toFloatArray());
            PythonBackendTest.waitFor(() -> { // the model writes its mark after the FINAL went out
                try {
                    return Files.readString(marks).endsWith("\n");
                } catch (java.io.IOException e) {
                    return false;
                }
            });
            assertEquals(List.of("raised: Unable to send response. Response sender has been closed."), Files.readAllLines(marks));
        }
    }
}
