package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An ONNX model with implicit state and a control input (src/test/resources/sequence/accumulate,
 * made by generate_models.py) through the real host and the sequence batcher: the core feeds
 * START and STATE_IN, keeps STATE_OUT for the sequence's next request, and two sequences share
 * one batch in their own rows.
 */
class SequenceStateTest {
    @TempDir
    Path temp;

    private static InferenceRequest req(long seq, float x, boolean start, boolean end) {
        return InferenceRequest.builder("accumulate").input(Tensor.ofFloats("INPUT", new long[] {1, 1}, x)).correlationId(seq)
                .sequenceStart(start).sequenceEnd(end).build();
    }

    private static float out(InferenceResponse r) {
        assertNull(r.output("STATE_OUT"), "the state output never reaches the client");
        return r.output("OUTPUT").toFloatArray()[0];
    }

    @Test
    void onnxStateAndControls_carriedPerSequence_twoSequencesInOneBatch() throws Exception {
        Path from;
        try {
            from = Path.of(Objects.requireNonNull(getClass().getResource("/sequence/accumulate")).toURI());
        } catch (URISyntaxException e) {
            throw new AssertionError(e);
        }
        Path model = Files.createDirectories(temp.resolve("repo/accumulate/1"));
        Files.copy(from.resolve("1/model.onnx"), model.resolve("model.onnx"));
        Files.copy(from.resolve("config.pbtxt"), temp.resolve("repo/accumulate/config.pbtxt"));
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(temp.resolve("repo")).modelControlMode(ModelControlMode.NONE).build()) {
            // OUTPUT = STATE_IN + INPUT + 1000 * START; the state starts at zero
            CompletableFuture<InferenceResponse> a1 = host.infer(req(1, 1, true, false));
            CompletableFuture<InferenceResponse> b1 = host.infer(req(2, 10, true, false));
            assertEquals(1001f, out(a1.get(30, TimeUnit.SECONDS)));
            assertEquals(1010f, out(b1.get(30, TimeUnit.SECONDS)));
            CompletableFuture<InferenceResponse> a2 = host.infer(req(1, 2, false, false));
            CompletableFuture<InferenceResponse> b2 = host.infer(req(2, 20, false, true));
            assertEquals(1003f, out(a2.get(30, TimeUnit.SECONDS)));
            assertEquals(1030f, out(b2.get(30, TimeUnit.SECONDS)));
            assertEquals(1006f, out(host.infer(req(1, 3, false, true)).get(30, TimeUnit.SECONDS)));
            assertEquals(0, host.sequenceSlotsInUse());
            assertEquals(0, host.openRequests());
        }
    }
}
