package io.backplane.backend.cpu;

import io.backplane.spi.DataType;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;

/** Shared bits of the benchmark and the tests that use its models (src/test/resources/bench). */
final class Benchmarks {
    private Benchmarks() {
    }

    /** bench/mlp: INPUT0 FP32 [64] -> 64x256 MatMul, Relu, 256x64 MatMul -> OUTPUT0 FP32 [64]; max_batch_size 32. */
    static ModelConfig mlpConfig() {
        return config("mlp", 64);
    }

    /** bench/&lt;name&gt;: INPUT0 FP32 [width] -> OUTPUT0 FP32 [width]; max_batch_size 32; one intra-op thread. */
    static ModelConfig config(String name, int width) {
        return ModelConfig.builder(name).platform("onnxruntime_onnx").maxBatchSize(32).input(TensorConfig.of("INPUT0", DataType.FP32, width))
                .output(TensorConfig.of("OUTPUT0", DataType.FP32, width)).parameter("intra_op_thread_count", "1").build();
    }
}
