package io.backplane.core.config;

import static io.backplane.core.config.ModelConfigValidator.error;

import io.backplane.protocol.inference.ModelSequenceBatching;
import io.backplane.spi.DataType;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.SequenceBatching.Control;
import io.backplane.spi.config.SequenceBatching.ControlKind;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Converts and checks Triton's {@code sequence_batching} block. Kept apart from the parser so that
 * the sequence batcher's config rules live in one file.
 */
final class SequenceBatchingConfig {
    private static final String P = "sequence_batching.";

    private SequenceBatchingConfig() {
    }

    static SequenceBatching convert(ModelSequenceBatching s, SourcePositions at) {
        SequenceBatching.Builder b = SequenceBatching.builder().iterative(s.getIterativeSequence());
        long idle = s.getMaxSequenceIdleMicroseconds();
        if (idle < 0) {
            throw error(at.at(P + "max_sequence_idle_microseconds"), P + "max_sequence_idle_microseconds", Long.toUnsignedString(idle)
                    + " is too large; use at most " + Long.MAX_VALUE);
        }
        if (s.hasField(ModelSequenceBatching.getDescriptor().findFieldByName("max_sequence_idle_microseconds")) || idle != 0) {
            b.maxSequenceIdleMicros(idle == 0 ? SequenceBatching.DEFAULT_IDLE_MICROS : idle);
        }
        switch (s.getStrategyChoiceCase()) {
            case OLDEST -> {
                ModelSequenceBatching.StrategyOldest o = s.getOldest();
                String p = P + "oldest.";
                b.strategy(SequenceBatching.Strategy.OLDEST).maxCandidateSequences(o.getMaxCandidateSequences())
                        .preferredBatchSizes(o.getPreferredBatchSizeList()).preserveOrdering(o.getPreserveOrdering())
                        .maxQueueDelayMicros(delay(o.getMaxQueueDelayMicroseconds(), p, at));
                if (o.getMaxCandidateSequences() < 0) {
                    throw error(at.at(p + "max_candidate_sequences"), p + "max_candidate_sequences", o.getMaxCandidateSequences()
                            + " is negative; give the number of sequences each instance may hold, or omit it");
                }
            }
            case DIRECT -> {
                ModelSequenceBatching.StrategyDirect d = s.getDirect();
                String p = P + "direct.";
                if (d.getMinimumSlotUtilization() != 0f) {
                    throw error(at.at(p + "minimum_slot_utilization"), p + "minimum_slot_utilization", d.getMinimumSlotUtilization()
                            + " is not supported by Backplane (a direct batch leaves with the slots ready when an instance is free, or after"
                            + " max_queue_delay_microseconds); remove the field");
                }
                b.strategy(SequenceBatching.Strategy.DIRECT).maxQueueDelayMicros(delay(d.getMaxQueueDelayMicroseconds(), p, at));
            }
            case STRATEGYCHOICE_NOT_SET -> b.strategy(SequenceBatching.Strategy.DIRECT);
        }
        for (int i = 0; i < s.getControlInputCount(); i++) {
            ModelSequenceBatching.ControlInput ci = s.getControlInput(i);
            String path = P + "control_input[" + i + "]";
            if (ci.getName().isEmpty()) {
                throw error(at.at(path), path + ".name", "a control input needs a name, the model input the core fills");
            }
            if (ci.getControlCount() != 1) {
                throw error(at.at(path), path + ".control", "control input '" + ci.getName() + "' has " + ci.getControlCount()
                        + " controls; give exactly one (one control input per control kind)");
            }
            b.control(control(ci.getName(), ci.getControl(0), path + ".control[0]", at));
        }
        for (int i = 0; i < s.getStateCount(); i++) {
            b.state(state(s.getState(i), P + "state[" + i + "]", at));
        }
        return ModelConfigParser.construct(b::build, at.at("sequence_batching"), "sequence_batching");
    }

    private static long delay(long v, String p, SourcePositions at) {
        if (v < 0) {
            throw error(at.at(p + "max_queue_delay_microseconds"), p + "max_queue_delay_microseconds", Long.toUnsignedString(v)
                    + " is too large; use at most " + Long.MAX_VALUE);
        }
        return v;
    }

    private static Control control(String name, ModelSequenceBatching.Control c, String path, SourcePositions at) {
        ControlKind kind = switch (c.getKind()) {
            case CONTROL_SEQUENCE_START -> ControlKind.CONTROL_SEQUENCE_START;
            case CONTROL_SEQUENCE_READY -> ControlKind.CONTROL_SEQUENCE_READY;
            case CONTROL_SEQUENCE_END -> ControlKind.CONTROL_SEQUENCE_END;
            case CONTROL_SEQUENCE_CORRID -> ControlKind.CONTROL_SEQUENCE_CORRID;
            case UNRECOGNIZED -> throw error(at.at(path + ".kind"), path + ".kind", "kind " + c.getKindValue() + " is not a control kind");
        };
        int lists = (c.getInt32FalseTrueCount() > 0 ? 1 : 0) + (c.getFp32FalseTrueCount() > 0 ? 1 : 0) + (c.getBoolFalseTrueCount() > 0 ? 1 : 0);
        if (kind == ControlKind.CONTROL_SEQUENCE_CORRID) {
            if (lists != 0) {
                throw error(at.at(path), path, "control input '" + name + "' (CONTROL_SEQUENCE_CORRID) takes data_type only, no false/true values");
            }
            DataType t = ModelConfigParser.dataType(c.getDataTypeValue(), name, path, at);
            if (t != DataType.UINT64 && t != DataType.INT64 && t != DataType.UINT32 && t != DataType.INT32 && t != DataType.BYTES) {
                throw error(at.at(path + ".data_type"), path + ".data_type", "control input '" + name + "' (CONTROL_SEQUENCE_CORRID) has data_type "
                        + t + "; use TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING");
            }
            return new Control(name, kind, t, List.of());
        }
        if (lists != 1) {
            throw error(at.at(path), path, "control input '" + name + "' (" + kind + ") needs exactly one of int32_false_true, fp32_false_true or"
                    + " bool_false_true, with two values (false, true)");
        }
        List<Double> values = new ArrayList<>(2);
        DataType type;
        if (c.getInt32FalseTrueCount() > 0) {
            c.getInt32FalseTrueList().forEach(v -> values.add(v.doubleValue()));
            type = DataType.INT32;
        } else if (c.getFp32FalseTrueCount() > 0) {
            c.getFp32FalseTrueList().forEach(v -> values.add(v.doubleValue()));
            type = DataType.FP32;
        } else {
            c.getBoolFalseTrueList().forEach(v -> values.add(v ? 1.0 : 0.0));
            type = DataType.BOOL;
        }
        if (values.size() != 2) {
            throw error(at.at(path), path, "control input '" + name + "' (" + kind + ") has " + values.size()
                    + " false/true values; give exactly two: the value for false, then for true");
        }
        return new Control(name, kind, type, values);
    }

    private static SequenceBatching.State state(ModelSequenceBatching.State s, String path, SourcePositions at) {
        if (s.getInputName().isEmpty() || s.getOutputName().isEmpty()) {
            throw error(at.at(path), path, "a state needs input_name and output_name");
        }
        if (s.getUseGrowableMemory()) {
            throw error(at.at(path + ".use_growable_memory"), path + ".use_growable_memory", "growable state memory is not supported by Backplane;"
                    + " remove the field");
        }
        DataType type = ModelConfigParser.dataType(s.getDataTypeValue(), s.getInputName(), path, at);
        for (long d : s.getDimsList()) {
            if (d < 1) {
                throw error(at.at(path + ".dims"), path + ".dims", "state '" + s.getInputName() + "' has dimension " + d
                        + "; implicit states need fixed dims ≥ 1");
            }
        }
        List<SequenceBatching.InitialState> initial = new ArrayList<>();
        for (int i = 0; i < s.getInitialStateCount(); i++) {
            ModelSequenceBatching.InitialState is = s.getInitialState(i);
            String ip = path + ".initial_state[" + i + "]";
            DataType it = ModelConfigParser.dataType(is.getDataTypeValue(), is.getName(), ip, at);
            if (it != type || !is.getDimsList().equals(s.getDimsList())) {
                throw error(at.at(ip), ip, "initial state '" + is.getName() + "' is " + it + " " + is.getDimsList() + " but state '"
                        + s.getInputName() + "' is " + type + " " + s.getDimsList() + "; make them equal");
            }
            String file = switch (is.getStateDataCase()) {
                case ZERO_DATA -> null;
                case DATA_FILE -> {
                    String f = is.getDataFile();
                    if (f.isEmpty() || f.contains("..") || f.startsWith("/")) {
                        throw error(at.at(ip + ".data_file"), ip + ".data_file", "'" + f
                                + "' is not a file name inside the model's initial_state folder");
                    }
                    yield f;
                }
                case STATEDATA_NOT_SET -> throw error(at.at(ip), ip, "initial state '" + is.getName() + "' needs zero_data: true or data_file");
            };
            initial.add(new SequenceBatching.InitialState(is.getName(), it, is.getDimsList(), file));
        }
        if (initial.size() > 1) {
            throw error(at.at(path + ".initial_state"), path + ".initial_state", "state '" + s.getInputName() + "' has " + initial.size()
                    + " initial states; give at most one");
        }
        return new SequenceBatching.State(s.getInputName(), s.getOutputName(), type, s.getDimsList(), initial);
    }

    /** Rules across the config: no dynamic batching beside it, control and state names distinct from the declared tensors. */
    static void validate(ModelConfig c, SourcePositions at) {
        SequenceBatching s = c.sequenceBatching();
        if (s == null) {
            return;
        }
        if (c.dynamicBatching() != null) {
            throw error(at.at("dynamic_batching"), "dynamic_batching", "a model has either dynamic_batching or sequence_batching, not both;"
                    + " remove one");
        }
        if (s.iterative() && !c.decoupled()) {
            throw error(at.at(P + "iterative_sequence"), P + "iterative_sequence", "an iterative sequence model reschedules its requests and"
                    + " answers through response senders; add model_transaction_policy { decoupled: true }");
        }
        if (!s.states().isEmpty() && c.decoupled()) {
            throw error(at.at(P + "state"), P + "state", "implicit state needs a model that is not decoupled (the state is taken from the"
                    + " request's one response); remove model_transaction_policy { decoupled: true } or the state");
        }
        Set<String> declared = new HashSet<>();
        c.inputs().forEach(t -> declared.add(t.name()));
        Set<String> added = new HashSet<>();
        for (int i = 0; i < s.controls().size(); i++) {
            String n = s.controls().get(i).inputName();
            if (declared.contains(n) || !added.add(n)) {
                throw error(at.at(P + "control_input[" + i + "].name"), P + "control_input.name", "control input '" + n
                        + "' is also declared as an input or another control; the core fills it, so give it its own name");
            }
        }
        for (int i = 0; i < s.states().size(); i++) {
            SequenceBatching.State st = s.states().get(i);
            if (declared.contains(st.inputName()) || !added.add(st.inputName())) {
                throw error(at.at(P + "state[" + i + "].input_name"), P + "state.input_name", "state input '" + st.inputName()
                        + "' is also declared as an input or a control; the core fills it, so give it its own name");
            }
            for (TensorConfig o : c.outputs()) {
                if (o.name().equals(st.outputName())) {
                    throw error(at.at(P + "state[" + i + "].output_name"), P + "state.output_name", "state output '" + st.outputName()
                            + "' is also declared as an output; the core keeps it for the sequence's next request and never returns it");
                }
            }
        }
    }
}
