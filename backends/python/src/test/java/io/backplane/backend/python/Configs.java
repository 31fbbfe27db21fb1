package io.backplane.backend.python;

import io.backplane.spi.DataType;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;

/** Model configs of the test models (what their config.pbtxt would say). */
final class Configs {
    private Configs() {
    }

    static ModelConfig addSub() {
        return ModelConfig.builder("add_sub").backend("python")
                .input(TensorConfig.of("INPUT0", DataType.FP32, 4)).input(TensorConfig.of("INPUT1", DataType.FP32, 4))
                .output(TensorConfig.of("OUTPUT0", DataType.FP32, 4)).output(TensorConfig.of("OUTPUT1", DataType.FP32, 4)).build();
    }

    static ModelConfig identity() {
        return ModelConfig.builder("identity").backend("python").maxBatchSize(0)
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT0", DataType.FP32, -1)).build();
    }

    static ModelConfig faulty() {
        return ModelConfig.builder("faulty").backend("python")
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT0", DataType.FP32, -1)).build();
    }

    static ModelConfig square() {
        return ModelConfig.builder("square").backend("python").decoupled(true)
                .input(TensorConfig.of("IN", DataType.INT32, 1)).output(TensorConfig.of("OUT", DataType.INT32, 1)).build();
    }

    static ModelConfig flood() {
        return ModelConfig.builder("flood").backend("python").decoupled(true).maxBatchSize(0)
                .input(TensorConfig.of("IN", DataType.INT32, 1)).input(TensorConfig.of("DATA", DataType.UINT8, -1))
                .output(TensorConfig.of("OUT", DataType.INT32, 2)).build();
    }

    static ModelConfig introspect() {
        return ModelConfig.builder("introspect").backend("python").parameter("answer", "42")
                .input(TensorConfig.of("TEXT", DataType.BYTES, -1)).output(TensorConfig.of("UPPER", DataType.BYTES, -1))
                .output(TensorConfig.of("INFO", DataType.BYTES, 1)).build();
    }

    /** {@code config} with max_batch_size 4, so that the core may hand several requests to one execute: inputs gain a batch dimension. */
    static ModelConfig batched(ModelConfig config) {
        return config.toBuilder().maxBatchSize(4).build();
    }

    static ModelConfig named(String name) {
        return ModelConfig.builder(name).backend("python")
                .input(TensorConfig.of("INPUT0", DataType.FP32, -1)).output(TensorConfig.of("OUTPUT0", DataType.FP32, -1)).build();
    }
}
