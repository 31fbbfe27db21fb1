package io.backplane.backend.torch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Outputs through the host equal {@code torch.jit.load(model.pt)(inputs)} computed in Python, on
 * models traced at test time (see {@link TorchModels}), from a Triton-layout repository whose
 * config.pbtxt files select the backend by Triton's platform {@code pytorch_libtorch}.
 */
class TorchServeTest {
    private static final float EPS = 1e-5f;
    @TempDir
    static Path repo;
    static BackplaneHost host;

    @BeforeAll
    static void start() throws Exception {
        Path models = TorchModels.dir();
        model("tiny_conv", models, """
                platform: "pytorch_libtorch"
                max_batch_size: 8
                input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]
                output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 5 ] } ]
                dynamic_batching { max_queue_delay_microseconds: 20000 }
                parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
                parameters: { key: "ENABLE_NVFUSER" value: { string_value: "true" } }
                """);
        // inputs named after forward(tokens, scale), declared in the other order
        model("two_inputs", models, """
                platform: "pytorch_libtorch"
                max_batch_size: 4
                input [ { name: "scale" data_type: TYPE_FP32 dims: [ 5 ] }, { name: "tokens" data_type: TYPE_INT64 dims: [ 5 ] } ]
                output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 5 ] } ]
                parameters: { key: "DISABLE_OPTIMIZED_EXECUTION" value: { string_value: "true" } }
                """);
        model("tuple_out", models, """
                backend: "pytorch"
                max_batch_size: 0
                input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2, 3, 4 ] } ]
                output [ { name: "argmax__2" data_type: TYPE_INT64 dims: [ 2, 3 ] },
                         { name: "sum__0" data_type: TYPE_FP32 dims: [ 2, 4 ] },
                         { name: "transposed__1" data_type: TYPE_FP32 dims: [ 2, 4, 3 ] } ]
                parameters: { key: "INFERENCE_MODE" value: { string_value: "false" } }
                """);
        host = BackplaneHost.builder().modelRepository(repo).backend(new TorchBackendFactory()).build();
    }

    private static void model(String name, Path models, String config) throws Exception {
        Path d = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.copy(models.resolve(name).resolve("model.pt"), d.resolve("model.pt"));
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), "name: \"" + name + "\"\n" + config);
    }

    @AfterAll
    static void stop() {
        if (host != null) {
            host.close();
        }
    }

    private static Tensor saved(String name, String model, String key, DataType type) throws Exception {
        TorchModels.Saved s = TorchModels.tensors(model).get(key);
        return Tensor.ofRaw(name, type, s.shape(), s.bytes());
    }

    private static InferenceResponse infer(InferenceRequest r) throws Exception {
        return host.infer(r).get(60, TimeUnit.SECONDS);
    }

    private static void assertClose(float[] want, float[] got, String what) {
        assertEquals(want.length, got.length, what + ": element count");
        for (int i = 0; i < want.length; i++) {
            if (Math.abs(want[i] - got[i]) > EPS) {
                fail(what + "[" + i + "]: torch " + want[i] + ", backplane " + got[i]);
            }
        }
    }

    @Test
    void tinyConv_equalsTorch() throws Exception {
        InferenceResponse r = infer(InferenceRequest.builder("tiny_conv").input(saved("INPUT__0", "tiny_conv", "in_0", DataType.FP32)).build());
        assertArrayEquals(new long[] {3, 5}, r.output("OUTPUT__0").shape());
        assertClose(TorchModels.tensors("tiny_conv").get("out_0").floats(), r.output("OUTPUT__0").toFloatArray(), "tiny_conv");
    }

    /** Rows of several concurrent requests: each gets torch's rows for its own input, batched or not. */
    @Test
    void tinyConv_concurrentRequests_eachEqualsItsRowsOfTorch() throws Exception {
        TorchModels.Saved in = TorchModels.tensors("tiny_conv").get("in_0");
        float[] want = TorchModels.tensors("tiny_conv").get("out_0").floats();
        int rowIn = in.bytes().length / 3;
        List<CompletableFuture<InferenceResponse>> calls = new ArrayList<>();
        int n = 24;
        for (int i = 0; i < n; i++) {
            int row = i % 3;
            byte[] one = Arrays.copyOfRange(in.bytes(), row * rowIn, (row + 1) * rowIn);
            calls.add(host.infer(InferenceRequest.builder("tiny_conv").input(Tensor.ofRaw("INPUT__0", DataType.FP32, new long[] {1, 3, 8, 8}, one))
                    .build()));
        }
        for (int i = 0; i < n; i++) {
            int row = i % 3;
            InferenceResponse r = calls.get(i).get(60, TimeUnit.SECONDS);
            assertArrayEquals(new long[] {1, 5}, r.output("OUTPUT__0").shape());
            assertClose(Arrays.copyOfRange(want, row * 5, row * 5 + 5), r.output("OUTPUT__0").toFloatArray(), "request " + i + " (row " + row + ")");
        }
    }

    @Test
    void twoInputs_boundByForwardArgumentNames_equalsTorch() throws Exception {
        InferenceResponse r = infer(InferenceRequest.builder("two_inputs").input(saved("tokens", "two_inputs", "in_0", DataType.INT64))
                .input(saved("scale", "two_inputs", "in_1", DataType.FP32)).build());
        assertClose(TorchModels.tensors("two_inputs").get("out_0").floats(), r.output("OUTPUT__0").toFloatArray(), "two_inputs");
    }

    @Test
    void tupleOutputs_mapByIndex_equalTorch() throws Exception {
        Map<String, TorchModels.Saved> t = TorchModels.tensors("tuple_out");
        TorchModels.Saved in = t.get("in_0");
        InferenceResponse r = infer(InferenceRequest.builder("tuple_out").input(Tensor.ofRaw("INPUT__0", DataType.FP32, in.shape(), in.bytes())).build());
        assertClose(t.get("out_0").floats(), r.output("sum__0").toFloatArray(), "sum__0");
        assertClose(t.get("out_1").floats(), r.output("transposed__1").toFloatArray(), "transposed__1");
        assertArrayEquals(new long[] {2, 4, 3}, r.output("transposed__1").shape());
        assertArrayEquals(t.get("out_2").longs(), r.output("argmax__2").toLongArray());
    }

    @Test
    void wrongDtype_isInvalidArgument_namingTheInput() throws Exception {
        try {
            infer(InferenceRequest.builder("tiny_conv").input(Tensor.ofInts("INPUT__0", new long[] {1, 3}, 1, 2, 3)).build());
            fail("a wrong data type was served");
        } catch (ExecutionException e) {
            BackplaneException b = (BackplaneException) e.getCause();
            assertEquals(ErrorCode.INVALID_ARGUMENT, b.code());
            assertTrue(b.getMessage().contains("INPUT__0"), b.getMessage());
        }
        try {
            infer(InferenceRequest.builder("tiny_conv").input(Tensor.ofFloats("INPUT__0", new long[] {1, 3, 8, 7}, new float[3 * 8 * 7])).build());
            fail("a wrong shape was served");
        } catch (ExecutionException e) {
            BackplaneException b = (BackplaneException) e.getCause();
            assertEquals(ErrorCode.INVALID_ARGUMENT, b.code());
            assertTrue(b.getMessage().contains("INPUT__0"), b.getMessage());
        }
        // the model serves on
        tinyConv_equalsTorch();
    }
}
