package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.ModelHarness;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

/** The committed test models (src/test/resources/models, made by src/test/python/generate_models.py) and their references. */
final class TestModels {
    private TestModels() {
    }

    static Path repository() {
        try {
            return Path.of(TestModels.class.getResource("/models/add_sub/config.pbtxt").toURI()).getParent().getParent();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static Path dir(String model) {
        return repository().resolve(model);
    }

    /** add_sub: INPUT0, INPUT1 FP32 [4] -> OUTPUT0 = sum, OUTPUT1 = difference; max_batch_size 8. */
    static ModelConfig addSub() {
        return ModelConfig.builder("add_sub").platform("onnxruntime_onnx").maxBatchSize(8)
                .input(TensorConfig.of("INPUT0", DataType.FP32, 4)).input(TensorConfig.of("INPUT1", DataType.FP32, 4))
                .output(TensorConfig.of("OUTPUT0", DataType.FP32, 4)).output(TensorConfig.of("OUTPUT1", DataType.FP32, 4)).build();
    }

    /** dynamic_dim: INPUT0 FP32 [-1] -> OUTPUT0 = 2x [-1], OUTPUT1 = row sum [1]; max_batch_size 8. */
    static ModelConfig dynamicDim() {
        return ModelConfig.builder("dynamic_dim").platform("onnxruntime_onnx").maxBatchSize(8)
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1))
                .output(TensorConfig.of("OUTPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT1", DataType.FP32, 1)).build();
    }

    /** identity_<type>: INPUT0 [-1] -> OUTPUT0 [-1]; max_batch_size 4. */
    static ModelConfig identity(DataType type) {
        return ModelConfig.builder("identity_" + type.name().toLowerCase(java.util.Locale.ROOT)).backend("onnxruntime").maxBatchSize(4)
                .input(TensorConfig.of("INPUT0", type, -1)).output(TensorConfig.of("OUTPUT0", type, -1)).build();
    }

    /** One reference case: input tensors and the outputs ONNX Runtime (Python) computed. */
    record Case(List<Tensor> inputs, List<Tensor> outputs) {
    }

    static List<Case> references(String model) {
        List<Case> cases = new ArrayList<>();
        List<Tensor> in = null;
        List<Tensor> out = null;
        try {
            for (String line : Files.readAllLines(dir(model).resolve("reference.txt"))) {
                String[] f = line.trim().split(" ");
                if (f[0].equals("case")) {
                    in = new ArrayList<>();
                    out = new ArrayList<>();
                    cases.add(new Case(in, out));
                    continue;
                }
                long[] shape = f[3].equals("scalar") ? new long[0] : Arrays.stream(f[3].split(",")).mapToLong(Long::parseLong).toArray();
                byte[] bytes = f.length > 4 ? HexFormat.of().parseHex(f[4]) : new byte[0];
                Tensor t = Tensor.ofRaw(f[1], DataType.fromProtocolName(f[2]), shape, bytes);
                (f[0].equals("input") ? in : out).add(t);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return cases;
    }

    /**
     * A harness for {@code config} on the cpu backend inside the real core, with the files of the
     * committed model folder of the same name (version 1) and the harness's exact batches.
     */
    static ModelHarness.Builder harness(ModelConfig config) {
        return harness(config, dir(config.name()));
    }

    /** As {@link #harness(ModelConfig)}, with the version-1 files of {@code modelDir}. */
    static ModelHarness.Builder harness(ModelConfig config, Path modelDir) {
        return harness(new OnnxBackendFactory(), config, modelDir);
    }

    /** As {@link #harness(ModelConfig, Path)}, with the backend of {@code factory} (e.g. one from a plugin class loader). */
    static ModelHarness.Builder harness(BackendFactory factory, ModelConfig config, Path modelDir) {
        ModelHarness.Builder b = ModelHarness.builder(factory).model(config).exactBatches();
        if (Files.isDirectory(modelDir.resolve("1"))) {
            b.versionFilesFrom(modelDir.resolve("1"));
        }
        return b;
    }

    static ModelHarness start(ModelConfig config) {
        return harness(config).start();
    }

    static InferenceRequest request(String model, Tensor... inputs) {
        return InferenceRequest.builder(model).inputs(List.of(inputs)).build();
    }

    /** Element-wise comparison: exact for integers, BOOL and BYTES; within 1e-6 relative for floating point. */
    static void assertTensorEquals(Tensor expected, Tensor actual) {
        assertEquals(expected.name(), actual.name(), "name");
        assertEquals(expected.dataType(), actual.dataType(), "datatype of " + expected.name());
        assertEquals(Arrays.toString(expected.shape()), Arrays.toString(actual.shape()), "shape of " + expected.name());
        switch (expected.dataType()) {
            case FP32, FP16, BF16 -> {
                float[] e = expected.toFloatArray();
                float[] a = actual.toFloatArray();
                for (int i = 0; i < e.length; i++) {
                    assertEquals(e[i], a[i], Math.abs(e[i]) * 1e-6f, expected.name() + "[" + i + "]");
                }
            }
            case FP64 -> {
                double[] e = expected.toDoubleArray();
                double[] a = actual.toDoubleArray();
                for (int i = 0; i < e.length; i++) {
                    assertEquals(e[i], a[i], Math.abs(e[i]) * 1e-12, expected.name() + "[" + i + "]");
                }
            }
            case BYTES -> assertEquals(expected.toStringList(), actual.toStringList(), expected.name());
            default -> assertEquals(HexFormat.of().formatHex(expected.toByteArray()), HexFormat.of().formatHex(actual.toByteArray()),
                    expected.name() + " bytes");
        }
    }
}
