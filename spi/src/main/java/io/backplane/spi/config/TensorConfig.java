package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.DataType;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One declared input or output ({@code input}/{@code output} in config.pbtxt).
 *
 * @param name tensor name, non-empty
 * @param dataType element type
 * @param dims shape without the batch dimension; -1 marks a variable dimension
 * @param reshape shape the backend sees instead of {@code dims}, or null
 * @param optional whether a request may omit this input
 */
public record TensorConfig(String name, DataType dataType, List<Long> dims, @Nullable List<Long> reshape, boolean optional) {
    public TensorConfig {
        requireNonNull(name, "name is null");
        requireNonNull(dataType, "dataType is null");
        dims = List.copyOf(dims);
        reshape = reshape == null ? null : List.copyOf(reshape);
        if (name.isEmpty()) {
            throw new IllegalArgumentException("tensor config name is empty");
        }
        for (long d : dims) {
            if (d < -1) {
                throw new IllegalArgumentException("tensor '" + name + "': dimension " + d + " is invalid; use ≥ 0, or -1 for variable");
            }
        }
    }

    public static TensorConfig of(String name, DataType dataType, long... dims) {
        return new TensorConfig(name, dataType, java.util.Arrays.stream(dims).boxed().toList(), null, false);
    }
}
