package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ResponseObserver;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Error texts that Triton's clients and operators' scripts match: Triton's exact sentence first,
 * Backplane's hint after it, through the real host and stubs. (The stub that cannot serve is in
 * {@link PythonReadinessTest}.)
 */
class TritonWordingTest {
    @TempDir
    Path temp;

    @BeforeAll
    static void python() throws Exception {
        PythonApiTest.python();
    }

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    private BackplaneHost host(String... models) throws Exception {
        PythonApiTest api = new PythonApiTest();
        api.temp = temp;
        return BackplaneHost.builder().modelRepository(api.repository(models)).modelControlMode(ModelControlMode.NONE)
                .backendOption("python", StubSettings.INTERPRETER, PythonApiTest.PYTHON).build();
    }

    private static BackplaneException failure(CompletableFuture<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(60, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof BackplaneException, String.valueOf(e.getCause()));
        return (BackplaneException) e.getCause();
    }

    @Test
    void sharedMemoryPoolCannotGrow_hostAndStubSide_tritonsSentenceThenTheHint() throws Exception {
        try (BackplaneHost host = host("big_output")) {
            String triton = "Failed to increase the shared memory pool size for key '";
            // the host's region: the request's inputs do not fit
            BackplaneException e = failure(host.infer(InferenceRequest.builder("big_output").input(Tensor.ofInts("N", new long[] {1}, 1))
                    .input(Tensor.ofFloats("PAD", new long[] {1 << 19}, new float[1 << 19])).build()));
            assertTrue(e.getMessage().startsWith(triton), e.getMessage());
            assertTrue(e.getMessage().contains(" bytes. (Backplane: ") && e.getMessage().contains("raise '" + StubSettings.SHM_MAX + "'"), e.getMessage());
            // the stub's pool: the outputs do not fit
            e = failure(host.infer(InferenceRequest.builder("big_output").input(Tensor.ofInts("N", new long[] {1}, 1 << 20)).build()));
            assertTrue(e.getMessage().contains(triton) && e.getMessage().contains("(Backplane: the outputs need"), e.getMessage());
            assertTrue(e.getMessage().indexOf(triton) < e.getMessage().indexOf("(Backplane:"), "Triton's sentence comes first: " + e.getMessage());
            // and the model serves on
            assertEquals(4, host.infer(InferenceRequest.builder("big_output").input(Tensor.ofInts("N", new long[] {1}, 4)).build())
                    .get(60, TimeUnit.SECONDS).output("OUT").toFloatArray().length);
        }
    }

    @Test
    void decoupledExecuteReturnsResponses_tritonsSentenceThenTheHint() throws Exception {
        try (BackplaneHost host = host("stream_async")) {
            CompletableFuture<BackplaneException> end = new CompletableFuture<>();
            host.stream(InferenceRequest.builder("stream_async").input(Tensor.ofInts("WAIT", new long[] {1}, 3)).build(), new ResponseObserver() {
                @Override
                public void onResponse(io.backplane.spi.InferenceResponse response) {
                }

                @Override
                public void onComplete() {
                    end.complete(null);
                }

                @Override
                public void onError(BackplaneException error) {
                    end.complete(error);
                }
            });
            BackplaneException e = end.get(60, TimeUnit.SECONDS);
            String m = String.valueOf(e == null ? null : e.getMessage());
            // Triton's stub names the instance there (pb_stub.cc), as Triton's decoupled_test expects
            String triton = "Python model 'stream_async_0_0' is using the decoupled mode and the execute function must return None.";
            assertTrue(m.contains(triton), m);
            assertTrue(m.indexOf(triton) < m.indexOf("(Backplane: a decoupled model answers through request.get_response_sender()"), m);
        }
    }
}
