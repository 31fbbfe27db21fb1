package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.ModelEnvironment;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Triton's QA-style python models that use torch on the CPU: add/sub in FP32 (pytorch_fp32_fp32),
 * DLPack both ways between {@code pb_utils.Tensor} and torch, and BF16 through torch. They run in
 * the real-model environment ({@code tools/model-env.sh}: {@code $BACKPLANE_MODEL_ENV}, else
 * {@code ~/.cache/backplane/model-env}), named to each model the documented way, Triton's
 * {@code EXECUTION_ENV_PATH} parameter pointing at the unpacked environment; without it they skip,
 * naming the command that makes it.
 */
class PythonTorchTest {
    @TempDir
    Path temp;

    static Path env;

    @BeforeAll
    static void modelEnvironment() throws Exception {
        Path dir = ModelEnvironment.directory();
        Path python = dir.resolve("bin/python");
        boolean ok = Files.isExecutable(python);
        if (ok) {
            Process p = new ProcessBuilder(python.toString(), "-c", "import numpy, torch").redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            ok = p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0;
        }
        Assumptions.assumeTrue(ok, "no Python environment with torch at " + dir + ": run tools/model-env.sh to make it"
                + " (or point BACKPLANE_MODEL_ENV at one)");
        env = dir.toAbsolutePath();
    }

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    /** A copy of the api-repository models whose configs name the model environment (EXECUTION_ENV_PATH). */
    private Path repository(String... models) throws IOException {
        PythonApiTest api = new PythonApiTest();
        api.temp = temp;
        Path repo = api.repository(models);
        for (String m : models) {
            Path config = repo.resolve(m).resolve("config.pbtxt");
            Files.writeString(config, Files.readString(config) + "\nparameters { key: \"" + ExecutionEnvironments.PARAMETER
                    + "\" value: { string_value: \"" + env + "\" } }\n");
        }
        return repo;
    }

    private static BackplaneHost host(Path repo) {
        // python3 (numpy only) is the backend's interpreter: only EXECUTION_ENV_PATH brings torch; it names the shared
        // model environment, outside the repository
        return BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).allowLinksOutsideRepository(true).build();
    }

    private static InferenceResponse infer(BackplaneHost host, InferenceRequest r) throws Exception {
        return host.infer(r).get(120, TimeUnit.SECONDS);
    }

    @Test
    void pytorchFp32Fp32_addSubInTorch_batched() throws Exception {
        try (BackplaneHost host = host(repository("torch_fp32_fp32"))) {
            float[] a = new float[32], b = new float[32], sum = new float[32], diff = new float[32];
            for (int i = 0; i < 32; i++) {
                a[i] = i * 0.5f;
                b[i] = 3 - i;
                sum[i] = a[i] + b[i];
                diff[i] = a[i] - b[i];
            }
            InferenceResponse r = infer(host, InferenceRequest.builder("torch_fp32_fp32").input(Tensor.ofFloats("INPUT0", new long[] {2, 16}, a))
                    .input(Tensor.ofFloats("INPUT1", new long[] {2, 16}, b)).build());
            assertEquals(DataType.FP32, r.output("OUTPUT0").dataType());
            assertArrayEquals(sum, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(diff, r.output("OUTPUT1").toFloatArray());
        }
    }

    @Test
    void torchModule_tensorsThroughDlpack_addSub() throws Exception {
        try (BackplaneHost host = host(repository("torch_add_sub"))) {
            InferenceResponse r = infer(host, InferenceRequest.builder("torch_add_sub").input(Tensor.ofFloats("INPUT0", new long[] {4}, 1, 2, 3, 4))
                    .input(Tensor.ofFloats("INPUT1", new long[] {4}, 1, 1, 1, 1)).build());
            assertArrayEquals(new float[] {2, 3, 4, 5}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {0, 1, 2, 3}, r.output("OUTPUT1").toFloatArray());
        }
    }

    @Test
    void dlpack_pbTensorAndTorch_bothWaysWithoutCopies() throws Exception {
        try (BackplaneHost host = host(repository("torch_dlpack"))) {
            byte[] f16 = ByteBuffer.allocate(6).order(ByteOrder.LITTLE_ENDIAN).putShort((short) 0x3c00).putShort((short) 0x4000)
                    .putShort((short) 0xc200).array(); // 1, 2, -3
            InferenceResponse r = infer(host, InferenceRequest.builder("torch_dlpack").input(Tensor.ofRaw("F16", DataType.FP16, new long[] {3}, f16))
                    .input(Tensor.ofLongs("I64", new long[] {2, 2}, 1, -2, 3, 1L << 40)).input(Tensor.ofBooleans("B", new long[] {2}, true, false)).build());
            byte[] doubled = ByteBuffer.allocate(6).order(ByteOrder.LITTLE_ENDIAN).putShort((short) 0x4000).putShort((short) 0x4400)
                    .putShort((short) 0xc600).array(); // 2, 4, -6
            assertEquals(DataType.FP16, r.output("F16_OUT").dataType());
            assertArrayEquals(doubled, r.output("F16_OUT").toByteArray());
            assertArrayEquals(new long[] {10, -20, 30, 10L << 40}, r.output("I64_OUT").toLongArray());
            assertArrayEquals(new boolean[] {false, true}, r.output("B_OUT").toBooleanArray());
            assertArrayEquals(new boolean[] {true, true, true}, r.output("SHARED").toBooleanArray(),
                    "input capsule, output capsule and the round trip share memory with torch");
        }
    }

    @Test
    void bf16_throughTorch_asTritonMapsIt() throws Exception {
        try (BackplaneHost host = host(repository("torch_bf16", "tensors"))) {
            byte[] x = {(byte) 0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, (byte) 0x80, (byte) 0xbf}; // 1, 2, 3, -1 as bfloat16
            InferenceResponse r = infer(host, InferenceRequest.builder("torch_bf16").input(Tensor.ofRaw("X", DataType.BF16, new long[] {4}, x))
                    .input(Tensor.ofFloats("F", new long[] {4}, 0.5f, 4, -8, 1.5f)).build());
            assertEquals(DataType.BF16, r.output("X2").dataType());
            assertArrayEquals(new byte[] {0x00, 0x40, (byte) 0x80, 0x40, (byte) 0xc0, 0x40, 0x00, (byte) 0xc0}, r.output("X2").toByteArray(),
                    "2, 4, 6, -2 as bfloat16");
            assertArrayEquals(new byte[] {0x00, 0x3f, (byte) 0x80, 0x40, 0x00, (byte) 0xc1, (byte) 0xc0, 0x3f}, r.output("F_BF16").toByteArray(),
                    "0.5, 4, -8, 1.5 as bfloat16");
            assertArrayEquals(new float[] {1, 2, 3, -1}, r.output("X_FP32").toFloatArray());
            // the qa-style tensors model: BF16 passes through torch and out again unchanged
            byte[] h = {(byte) 0x80, 0x3f, 0x00, 0x40, 0x40, 0x40};
            r = infer(host, InferenceRequest.builder("tensors").input(Tensor.ofFloats("F", new long[] {2, 3}, 1, 2, 3, 4, 5, 6))
                    .input(Tensor.ofRaw("H", DataType.BF16, new long[] {3}, h)).input(Tensor.ofStrings("S", new long[] {2}, "ab", "cde")).build());
            assertEquals(DataType.BF16, r.output("H_OUT").dataType());
            assertArrayEquals(h, r.output("H_OUT").toByteArray());
        }
    }
}
