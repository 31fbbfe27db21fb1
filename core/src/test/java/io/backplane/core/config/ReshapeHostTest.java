package io.backplane.core.config;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.backplane.core.BackplaneHost;
import io.backplane.core.testing.Hygiene;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@code reshape} through the host: the backend sees the reshaped shape, the client the declared one. */
class ReshapeHostTest {
    private static InferenceResponse infer(BackplaneHost host, InferenceRequest request) throws Exception {
        InferenceResponse r = host.infer(request).get(30, TimeUnit.SECONDS);
        assertFalse(r.isError(), () -> String.valueOf(r.error()));
        return r;
    }

    @Test
    void batchedModel_backendSeesReshape_clientSeesDims() throws Exception {
        HostProbeBackend probe = new HostProbeBackend("probe", BackendCapabilities.DEFAULT, 0);
        probe.outputShape = new long[] {2, 2, 2}; // what the backend produces: [batch] + reshape of OUT
        ModelConfig config = ModelConfig.builder("m").backend("probe").maxBatchSize(4)
                .input(TensorConfig.builder("X", DataType.INT32).dims(4).reshape(List.of(2L, 2L)).build())
                .output(TensorConfig.builder("X_OUT", DataType.INT32).dims(4).reshape(List.of(2L, 2L)).build()).build();
        try (BackplaneHost host = BackplaneHost.builder().backend(probe).model(config).build()) {
            InferenceResponse r = infer(host, InferenceRequest.builder("m").input(Tensor.ofInts("X", new long[] {2, 4}, 1, 2, 3, 4, 5, 6, 7, 8))
                    .build());
            assertEquals(List.of("X[2, 2, 2]"), List.copyOf(probe.seenShapes), "the backend sees [batch] + reshape");
            Tensor out = Objects.requireNonNull(r.output("X_OUT"));
            assertArrayEquals(new long[] {2, 4}, out.shape(), "the client sees [batch] + dims");
            assertArrayEquals(new int[] {1, 2, 3, 4, 5, 6, 7, 8}, out.toIntArray(), "only the shape changes");
        }
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void scalarReshapeAndVariableDims_areResolvedFromTheData() throws Exception {
        HostProbeBackend probe = new HostProbeBackend("probe", BackendCapabilities.DEFAULT, 0);
        ModelConfig config = ModelConfig.builder("m").backend("probe")
                .input(TensorConfig.builder("S", DataType.FP32).dims(1).reshape(List.of()).build())
                .input(TensorConfig.builder("V", DataType.INT64).dims(-1).reshape(List.of(-1L, 2L)).build())
                .output(TensorConfig.builder("S_OUT", DataType.FP32).dims(1).reshape(List.of()).build())
                .output(TensorConfig.builder("V_OUT", DataType.INT64).dims(-1).reshape(List.of(-1L, 2L)).build()).build();
        try (BackplaneHost host = BackplaneHost.builder().backend(probe).model(config).build()) {
            InferenceResponse r = infer(host, InferenceRequest.builder("m").input(Tensor.ofFloats("S", new long[] {1}, 0.5f))
                    .input(Tensor.ofLongs("V", new long[] {6}, 1, 2, 3, 4, 5, 6)).build());
            assertEquals(List.of("S[]", "V[3, 2]"), List.copyOf(probe.seenShapes));
            assertArrayEquals(new long[] {1}, Objects.requireNonNull(r.output("S_OUT")).shape());
            assertArrayEquals(new long[] {6}, Objects.requireNonNull(r.output("V_OUT")).shape());
        }
        Hygiene.assertNoBackplaneThreads();
    }

    @Test
    void withoutReshape_shapesPassUnchanged() throws Exception {
        HostProbeBackend probe = new HostProbeBackend("probe", BackendCapabilities.DEFAULT, 0);
        ModelConfig config = ModelConfig.builder("m").backend("probe").maxBatchSize(2).input(TensorConfig.of("X", DataType.INT32, 2))
                .output(TensorConfig.of("X_OUT", DataType.INT32, 2)).build();
        try (BackplaneHost host = BackplaneHost.builder().backend(probe).model(config).build()) {
            InferenceResponse r = infer(host, InferenceRequest.builder("m").input(Tensor.ofInts("X", new long[] {1, 2}, 1, 2)).build());
            assertEquals(List.of("X[1, 2]"), List.copyOf(probe.seenShapes));
            assertArrayEquals(new long[] {1, 2}, Objects.requireNonNull(r.output("X_OUT")).shape());
        }
        Hygiene.assertNoBackplaneThreads();
    }
}
