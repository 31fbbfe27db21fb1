package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * What a client asks of a model: an immutable value built with {@link #builder(String)}.
 *
 * <p>The host validates it against the model's config before it is queued; a backend therefore
 * sees only inputs that the config declares, with the declared datatypes and compatible shapes.
 */
public final class InferenceRequest {
    /** {@link #modelVersion()} value meaning "the version the policy serves, newest first". */
    public static final long LATEST = -1;
    /** {@link #flags()} bit: the first request of a sequence (Triton's {@code TRITONSERVER_REQUEST_FLAG_SEQUENCE_START}). */
    public static final int SEQUENCE_START = 1;
    /** {@link #flags()} bit: the last request of a sequence (Triton's {@code TRITONSERVER_REQUEST_FLAG_SEQUENCE_END}). */
    public static final int SEQUENCE_END = 2;

    private final String modelName;
    private final long modelVersion;
    private final String id;
    private final List<Tensor> inputs;
    private final List<String> requestedOutputs;
    private final Map<String, Object> parameters;
    private final int priority;
    private final long timeoutMicros;
    private final String correlationId;
    private final RequestTrace trace;
    private final boolean correlationIdIsNumber;
    private final int flags;
    private final Map<String, Integer> classifications;

    private InferenceRequest(Builder b) {
        this.trace = b.trace;
        this.modelName = b.modelName;
        this.modelVersion = b.modelVersion;
        this.id = b.id;
        this.inputs = List.copyOf(b.inputs);
        this.requestedOutputs = List.copyOf(b.requestedOutputs);
        this.parameters = Parameters.copy(b.parameters, "request to '" + b.modelName + "'");
        this.priority = b.priority;
        this.timeoutMicros = b.timeoutMicros;
        this.correlationId = b.correlationId;
        this.correlationIdIsNumber = b.correlationIdIsNumber;
        this.flags = b.flags;
        this.classifications = Map.copyOf(b.classifications);
        Set<String> names = new HashSet<>();
        for (Tensor t : inputs) {
            if (!names.add(t.name())) {
                throw BackplaneException.invalid("request to '" + modelName + "' has input '" + t.name() + "' twice");
            }
        }
    }

    public static Builder builder(String modelName) {
        return new Builder(modelName);
    }

    /** A builder starting from this request's values. */
    public Builder toBuilder() {
        Builder b = new Builder(modelName).version(modelVersion).id(id).priority(priority).timeoutMicros(timeoutMicros)
                .flags(flags).trace(trace);
        if (correlationIdIsNumber) {
            b.correlationId(Long.parseUnsignedLong(correlationId));
        } else {
            b.correlationId(correlationId);
        }
        b.inputs.addAll(inputs);
        b.requestedOutputs.addAll(requestedOutputs);
        b.parameters.putAll(parameters);
        b.classifications.putAll(classifications);
        return b;
    }

    public String modelName() {
        return modelName;
    }

    /** The version asked for, or {@link #LATEST}. */
    public long modelVersion() {
        return modelVersion;
    }

    /** The client's own id for this request, echoed in responses; may be empty, need not be unique. */
    public String id() {
        return id;
    }

    public List<Tensor> inputs() {
        return inputs;
    }

    /** The input named {@code name}, or null. */
    public @Nullable Tensor input(String name) {
        for (Tensor t : inputs) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        return null;
    }

    /** Output names the client wants; empty means all outputs. */
    public List<String> requestedOutputs() {
        return requestedOutputs;
    }

    /** Request parameters: String, Long, Boolean or Double values. */
    public Map<String, Object> parameters() {
        return parameters;
    }

    /** Priority level, 1 is highest; 0 means the model's default level. */
    public int priority() {
        return priority;
    }

    /** Queue timeout override in microseconds; 0 means the model's default. */
    public long timeoutMicros() {
        return timeoutMicros;
    }

    /** The trace this request is recorded in; {@link RequestTrace#NONE} when it is not traced. */
    public RequestTrace trace() {
        return trace;
    }

    /**
     * Sequence correlation id; empty when none. A numeric id (Triton's uint64 kind) reads as its
     * unsigned decimal text, see {@link #correlationIdIsNumber()}.
     */
    public String correlationId() {
        return correlationId;
    }

    /**
     * Whether the correlation id is of Triton's uint64 kind (set with
     * {@link Builder#correlationId(long)}) rather than a string. The two kinds name different
     * sequences: {@code 7} and {@code "7"} are not the same id.
     */
    public boolean correlationIdIsNumber() {
        return correlationIdIsNumber;
    }

    /** The sequence flags: {@link #SEQUENCE_START} and {@link #SEQUENCE_END} bits, 0 when neither. */
    public int flags() {
        return flags;
    }

    /** Whether {@link #flags()} has {@link #SEQUENCE_START}. */
    public boolean isSequenceStart() {
        return (flags & SEQUENCE_START) != 0;
    }

    /** Whether {@link #flags()} has {@link #SEQUENCE_END}. */
    public boolean isSequenceEnd() {
        return (flags & SEQUENCE_END) != 0;
    }

    /**
     * Outputs the client asked to receive as classifications (Triton's classification extension),
     * each with the number of top classes wanted; the host turns such an output into a BYTES tensor
     * of {@code "<value>:<index>[:<label>]"} strings. Backends see the plain output. Never null.
     */
    public Map<String, Integer> classifications() {
        return classifications;
    }

    @Override
    public String toString() {
        return "InferenceRequest[" + modelName + (modelVersion == LATEST ? "" : ":" + modelVersion)
                + (id.isEmpty() ? "" : ", id=" + id) + ", inputs=" + inputs + "]";
    }

    /** Builds {@link InferenceRequest}s; not thread-safe. */
    public static final class Builder {
        private final String modelName;
        private long modelVersion = LATEST;
        private String id = "";
        private final List<Tensor> inputs = new ArrayList<>();
        private final List<String> requestedOutputs = new ArrayList<>();
        private final Map<String, Object> parameters = new LinkedHashMap<>();
        private int priority;
        private long timeoutMicros;
        private String correlationId = "";
        private RequestTrace trace = RequestTrace.NONE;
        private boolean correlationIdIsNumber;
        private int flags;
        private final Map<String, Integer> classifications = new LinkedHashMap<>();

        private Builder(String modelName) {
            this.modelName = requireNonNull(modelName, "modelName is null");
            if (modelName.isEmpty()) {
                throw BackplaneException.invalid("model name is empty");
            }
        }

        public Builder version(long version) {
            if (version < LATEST || version == 0) {
                throw BackplaneException.invalid("model version " + version + " is invalid: versions are ≥ 1, or LATEST (-1)");
            }
            this.modelVersion = version;
            return this;
        }

        public Builder id(String id) {
            this.id = requireNonNull(id, "id is null");
            return this;
        }

        public Builder input(Tensor tensor) {
            inputs.add(requireNonNull(tensor, "tensor is null"));
            return this;
        }

        public Builder inputs(List<Tensor> tensors) {
            tensors.forEach(this::input);
            return this;
        }

        /** Removes every input added so far (e.g. to replace the inputs of a {@link #toBuilder()} copy). */
        public Builder clearInputs() {
            inputs.clear();
            return this;
        }

        public Builder requestOutput(String name) {
            requestedOutputs.add(requireNonNull(name, "name is null"));
            return this;
        }

        /**
         * Requests output {@code name} as its top {@code count} classes (Triton's classification
         * extension: REST output parameter {@code classification}, gRPC {@code classification}).
         *
         * @throws BackplaneException INVALID_ARGUMENT when {@code count} is below 1
         */
        public Builder requestClassification(String name, int count) {
            requireNonNull(name, "name is null");
            if (count < 1) {
                throw BackplaneException.invalid("output '" + name + "': classification count " + count
                        + " must be ≥ 1 (the number of top classes to return)");
            }
            if (!requestedOutputs.contains(name)) {
                requestedOutputs.add(name);
            }
            classifications.put(name, count);
            return this;
        }

        public Builder parameter(String key, Object value) {
            parameters.put(requireNonNull(key, "key is null"), requireNonNull(value, "value is null"));
            return this;
        }

        public Builder priority(int priority) {
            if (priority < 0) {
                throw BackplaneException.invalid("priority " + priority + " is negative: use 0 for the default, 1 for the highest level");
            }
            this.priority = priority;
            return this;
        }

        public Builder timeoutMicros(long timeoutMicros) {
            if (timeoutMicros < 0) {
                throw BackplaneException.invalid("timeout " + timeoutMicros + " µs is negative: use 0 for the model's default");
            }
            this.timeoutMicros = timeoutMicros;
            return this;
        }

        /** A string correlation id (Triton's string kind); empty for none. */
        public Builder correlationId(String correlationId) {
            this.correlationId = requireNonNull(correlationId, "correlationId is null");
            this.correlationIdIsNumber = false;
            return this;
        }

        /**
         * A numeric correlation id (Triton's uint64 kind, read as unsigned); 0 means none, as in
         * Triton.
         */
        public Builder correlationId(long correlationId) {
            this.correlationId = correlationId == 0 ? "" : Long.toUnsignedString(correlationId);
            this.correlationIdIsNumber = correlationId != 0;
            return this;
        }

        /**
         * The sequence flags, {@link #SEQUENCE_START} and/or {@link #SEQUENCE_END}.
         *
         * @throws BackplaneException INVALID_ARGUMENT for any other bit
         */
        public Builder flags(int flags) {
            if ((flags & ~(SEQUENCE_START | SEQUENCE_END)) != 0) {
                throw BackplaneException.invalid("request flags " + flags + " are invalid: use SEQUENCE_START (1), SEQUENCE_END (2) or both");
            }
            this.flags = flags;
            return this;
        }

        /** Sets or clears {@link #SEQUENCE_START}. */
        public Builder sequenceStart(boolean start) {
            flags = start ? flags | SEQUENCE_START : flags & ~SEQUENCE_START;
            return this;
        }

        /** Sets or clears {@link #SEQUENCE_END}. */
        public Builder sequenceEnd(boolean end) {
            flags = end ? flags | SEQUENCE_END : flags & ~SEQUENCE_END;
            return this;
        }

        /** The trace the host records this request in (Triton's trace extension); {@link RequestTrace#NONE} by default. */
        public Builder trace(RequestTrace trace) {
            this.trace = requireNonNull(trace, "trace is null");
            return this;
        }

        public InferenceRequest build() {
            return new InferenceRequest(this);
        }
    }
}
