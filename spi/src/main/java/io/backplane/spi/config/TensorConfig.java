package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.DataType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One declared input or output ({@code input}/{@code output} in config.pbtxt). Immutable and
 * thread-safe; build one with {@link #of} or {@link #builder}.
 *
 * <p><b>Reshape.</b> When {@link #reshape()} is set, clients send and receive tensors shaped as
 * {@link #dims()} (plus the batch dimension when the model batches), and the backend sees
 * them shaped as {@link #reshape()} (plus the same batch dimension). The core applies it in
 * both directions: it reshapes inputs before {@code execute}, and reshapes the backend's
 * outputs back to the declared shape before a client sees them.
 *
 * <p>This type grows with Triton's {@code ModelInput}/{@code ModelOutput}: it has no public
 * constructor, so fields can be added without breaking compiled plugins.
 */
public final class TensorConfig {
    private final String name;
    private final DataType dataType;
    private final List<Long> dims;
    private final @Nullable List<Long> reshape;
    private final boolean optional;

    private TensorConfig(Builder b) {
        this.name = requireNonNull(b.name, "name is null");
        this.dataType = requireNonNull(b.dataType, "dataType is null");
        this.dims = List.copyOf(b.dims);
        this.reshape = b.reshape == null ? null : List.copyOf(b.reshape);
        this.optional = b.optional;
        if (name.isEmpty()) {
            throw new IllegalArgumentException("tensor config name is empty");
        }
        for (long d : dims) {
            if (d < -1) {
                throw new IllegalArgumentException("tensor '" + name + "': dimension " + d + " is invalid; use ≥ 0, or -1 for variable");
            }
        }
    }

    /** A required tensor with these dims and no reshape. */
    public static TensorConfig of(String name, DataType dataType, long... dims) {
        return builder(name, dataType).dims(dims).build();
    }

    /** A builder for a tensor named {@code name} of {@code dataType}; dims default to none. */
    public static Builder builder(String name, DataType dataType) {
        return new Builder(name, dataType);
    }

    /** A builder holding this tensor's values. */
    public Builder toBuilder() {
        return new Builder(name, dataType).dims(dims).reshape(reshape).optional(optional);
    }

    /** Tensor name, non-empty. */
    public String name() {
        return name;
    }

    /** Element type. */
    public DataType dataType() {
        return dataType;
    }

    /** Shape without the batch dimension; -1 marks a variable dimension. Immutable. */
    public List<Long> dims() {
        return dims;
    }

    /**
     * The config's {@code reshape}: the shape the backend sees instead of {@link #dims()}, or null
     * when the config has none. Backends that only need the shape they receive call
     * {@link #modelDims()}, which is never null. Immutable.
     */
    public @Nullable List<Long> reshape() {
        return reshape;
    }

    /**
     * The shape a backend receives, without the batch dimension: {@link #reshape()} when the config
     * has one, else {@link #dims()}. Never null; immutable. The core reshapes each request's tensors
     * to it before {@code execute}.
     *
     * @since SPI 6
     */
    public List<Long> modelDims() {
        return reshape != null ? reshape : dims;
    }

    /** Whether a request may omit this input (always false for outputs). */
    public boolean optional() {
        return optional;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorConfig t && name.equals(t.name) && dataType == t.dataType && dims.equals(t.dims)
                && Objects.equals(reshape, t.reshape) && optional == t.optional;
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, dataType, dims, reshape, optional);
    }

    @Override
    public String toString() {
        return "TensorConfig[name=" + name + ", dataType=" + dataType + ", dims=" + dims + (reshape != null ? ", reshape=" + reshape : "")
                + (optional ? ", optional" : "") + "]";
    }

    /** Builds {@link TensorConfig}s; not thread-safe. */
    public static final class Builder {
        private final String name;
        private final DataType dataType;
        private List<Long> dims = new ArrayList<>();
        private @Nullable List<Long> reshape;
        private boolean optional;

        private Builder(String name, DataType dataType) {
            this.name = requireNonNull(name, "name is null");
            this.dataType = requireNonNull(dataType, "dataType is null");
        }

        /** Shape without the batch dimension; -1 for a variable dimension. */
        public Builder dims(List<Long> v) {
            dims = new ArrayList<>(requireNonNull(v, "dims is null"));
            return this;
        }

        /** Shape without the batch dimension; -1 for a variable dimension. */
        public Builder dims(long... v) {
            return dims(Arrays.stream(v).boxed().toList());
        }

        /** The shape the backend sees instead of dims, or null for none (the default). */
        public Builder reshape(@Nullable List<Long> v) {
            reshape = v == null ? null : new ArrayList<>(v);
            return this;
        }

        /** Whether a request may omit this input; false by default. */
        public Builder optional(boolean v) {
            optional = v;
            return this;
        }

        /**
         * The tensor config.
         *
         * @throws IllegalArgumentException naming the tensor and the bad value when the name is
         *     empty or a dimension is below -1
         */
        public TensorConfig build() {
            return new TensorConfig(this);
        }
    }
}
