package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.DataType;
import io.backplane.spi.Experimental;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Triton's {@code sequence_batching} block: a stateful model whose requests carry a correlation
 * id and go, in arrival order, to one sequence slot. Immutable and thread-safe; no public
 * constructor, so fields can be added without breaking compiled plugins. Build one with
 * {@link #builder()}.
 */
@Experimental
public final class SequenceBatching {
    /** Triton's default {@code max_sequence_idle_microseconds}: one second. */
    public static final long DEFAULT_IDLE_MICROS = 1_000_000;

    /** How sequences share the model's slots. */
    public enum Strategy {
        /** One slot per sequence; a slot is one batch index of one instance. */
        DIRECT,
        /** Candidate sequences on each instance; a batch takes the oldest ready request of each. */
        OLDEST
    }

    /** Triton's control kinds. */
    public enum ControlKind {
        CONTROL_SEQUENCE_START, CONTROL_SEQUENCE_READY, CONTROL_SEQUENCE_END, CONTROL_SEQUENCE_CORRID
    }

    /**
     * One control the core fills into input {@code inputName}: a boolean-like kind with its
     * false/true values of {@code dataType} (INT32, FP32 or BOOL), or CORRID of UINT64 or STRING.
     */
    public record Control(String inputName, ControlKind kind, DataType dataType, List<Double> falseTrue) {
        public Control {
            requireNonNull(inputName, "inputName is null");
            requireNonNull(kind, "kind is null");
            requireNonNull(dataType, "dataType is null");
            falseTrue = List.copyOf(falseTrue);
        }
    }

    /** An initial value of an implicit state: zeros, or the bytes of a file in the model directory. */
    public record InitialState(String name, DataType dataType, List<Long> dims, @Nullable String dataFile) {
        public InitialState {
            requireNonNull(name, "name is null");
            requireNonNull(dataType, "dataType is null");
            dims = List.copyOf(dims);
        }
    }

    /** An implicit state: the model's {@code outputName} of one request is its {@code inputName} of the next. */
    public record State(String inputName, String outputName, DataType dataType, List<Long> dims, List<InitialState> initialStates) {
        public State {
            requireNonNull(inputName, "inputName is null");
            requireNonNull(outputName, "outputName is null");
            requireNonNull(dataType, "dataType is null");
            dims = List.copyOf(dims);
            initialStates = List.copyOf(initialStates);
        }
    }

    private final Strategy strategy;
    private final long maxSequenceIdleMicros;
    private final long maxQueueDelayMicros;
    private final int maxCandidateSequences;
    private final List<Integer> preferredBatchSizes;
    private final boolean preserveOrdering;
    private final List<Control> controls;
    private final List<State> states;
    private final boolean iterative;

    private SequenceBatching(Builder b) {
        this.strategy = requireNonNull(b.strategy, "strategy is null");
        this.maxSequenceIdleMicros = b.maxSequenceIdleMicros;
        this.maxQueueDelayMicros = b.maxQueueDelayMicros;
        this.maxCandidateSequences = b.maxCandidateSequences;
        this.preferredBatchSizes = List.copyOf(b.preferredBatchSizes);
        this.preserveOrdering = b.preserveOrdering;
        this.controls = List.copyOf(b.controls);
        this.states = List.copyOf(b.states);
        this.iterative = b.iterative;
        if (maxSequenceIdleMicros < 0) {
            throw new IllegalArgumentException("max_sequence_idle_microseconds " + maxSequenceIdleMicros + " is negative");
        }
        if (maxQueueDelayMicros < 0) {
            throw new IllegalArgumentException("max_queue_delay_microseconds " + maxQueueDelayMicros + " is negative");
        }
        if (maxCandidateSequences < 0) {
            throw new IllegalArgumentException("max_candidate_sequences " + maxCandidateSequences + " is negative");
        }
        for (int p : preferredBatchSizes) {
            if (p < 1) {
                throw new IllegalArgumentException("preferred_batch_size " + p + " must be ≥ 1");
            }
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    /** {@code direct} (the default) or {@code oldest}. */
    public Strategy strategy() {
        return strategy;
    }

    /** How long a sequence may go without a request before its slot is released; Triton's default is one second. */
    public long maxSequenceIdleMicros() {
        return maxSequenceIdleMicros;
    }

    /** The strategy's {@code max_queue_delay_microseconds}: how long a batch waits for more ready slots. */
    public long maxQueueDelayMicros() {
        return maxQueueDelayMicros;
    }

    /** {@code oldest}: sequences per instance that may hold a slot at once; 0 means the model's max batch size. */
    public int maxCandidateSequences() {
        return maxCandidateSequences;
    }

    /** {@code oldest}: batch sizes to dispatch at once when reached. */
    public List<Integer> preferredBatchSizes() {
        return preferredBatchSizes;
    }

    /** {@code oldest}: responses leave in the order requests were dispatched. */
    public boolean preserveOrdering() {
        return preserveOrdering;
    }

    /** The control inputs the core fills, one entry per control. */
    public List<Control> controls() {
        return controls;
    }

    /** The implicit states the core carries from a sequence's response to its next request. */
    public List<State> states() {
        return states;
    }

    /**
     * Triton's {@code iterative_sequence}: the model reschedules a request until it completes
     * ({@link io.backplane.spi.ScheduledRequest#reschedule}); a request without a sequence id is
     * a sequence of its own, holding its slot until it is no longer rescheduled.
     */
    public boolean iterative() {
        return iterative;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SequenceBatching s && iterative == s.iterative && strategy == s.strategy && maxSequenceIdleMicros == s.maxSequenceIdleMicros
                && maxQueueDelayMicros == s.maxQueueDelayMicros && maxCandidateSequences == s.maxCandidateSequences
                && preferredBatchSizes.equals(s.preferredBatchSizes) && preserveOrdering == s.preserveOrdering && controls.equals(s.controls)
                && states.equals(s.states);
    }

    @Override
    public int hashCode() {
        return Objects.hash(iterative, strategy, maxSequenceIdleMicros, maxQueueDelayMicros, maxCandidateSequences, preferredBatchSizes, preserveOrdering,
                controls, states);
    }

    @Override
    public String toString() {
        return "SequenceBatching[" + strategy + ", idle=" + maxSequenceIdleMicros + "µs, delay=" + maxQueueDelayMicros + "µs, candidates="
                + maxCandidateSequences + ", preferred=" + preferredBatchSizes + ", preserveOrdering=" + preserveOrdering + ", controls="
                + controls + ", states=" + states + (iterative ? ", iterative" : "") + "]";
    }

    /** Builds {@link SequenceBatching}; not thread-safe. */
    public static final class Builder {
        private Strategy strategy = Strategy.DIRECT;
        private long maxSequenceIdleMicros = DEFAULT_IDLE_MICROS;
        private long maxQueueDelayMicros;
        private int maxCandidateSequences;
        private final List<Integer> preferredBatchSizes = new ArrayList<>();
        private boolean preserveOrdering;
        private final List<Control> controls = new ArrayList<>();
        private final List<State> states = new ArrayList<>();
        private boolean iterative;

        private Builder() {
        }

        public Builder strategy(Strategy v) {
            strategy = requireNonNull(v, "strategy is null");
            return this;
        }

        public Builder maxSequenceIdleMicros(long v) {
            maxSequenceIdleMicros = v;
            return this;
        }

        public Builder maxQueueDelayMicros(long v) {
            maxQueueDelayMicros = v;
            return this;
        }

        public Builder maxCandidateSequences(int v) {
            maxCandidateSequences = v;
            return this;
        }

        public Builder preferredBatchSizes(List<Integer> v) {
            preferredBatchSizes.clear();
            preferredBatchSizes.addAll(v);
            return this;
        }

        public Builder preserveOrdering(boolean v) {
            preserveOrdering = v;
            return this;
        }

        public Builder control(Control c) {
            controls.add(requireNonNull(c, "control is null"));
            return this;
        }

        public Builder state(State s) {
            states.add(requireNonNull(s, "state is null"));
            return this;
        }

        public Builder iterative(boolean v) {
            iterative = v;
            return this;
        }

        public SequenceBatching build() {
            return new SequenceBatching(this);
        }
    }
}
