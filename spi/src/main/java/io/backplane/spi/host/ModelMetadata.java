package io.backplane.spi.host;

import io.backplane.spi.DataType;
import java.util.List;

/**
 * A model's metadata as the Open Inference Protocol reports it: the shapes include the batch
 * dimension (-1) when the model batches.
 */
public record ModelMetadata(String name, List<Long> versions, String platform, String backend, List<TensorMetadata> inputs,
        List<TensorMetadata> outputs) {
    public ModelMetadata {
        versions = List.copyOf(versions);
        inputs = List.copyOf(inputs);
        outputs = List.copyOf(outputs);
    }

    /** One tensor's name, datatype and shape (-1 for variable dimensions). */
    public record TensorMetadata(String name, DataType datatype, List<Long> shape) {
        public TensorMetadata {
            shape = List.copyOf(shape);
        }
    }
}
