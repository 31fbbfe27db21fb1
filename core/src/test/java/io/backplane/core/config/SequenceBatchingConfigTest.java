package io.backplane.core.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.SequenceBatching.Control;
import io.backplane.spi.config.SequenceBatching.ControlKind;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code sequence_batching} as Triton's documentation writes it, and each rule's error. */
class SequenceBatchingConfigTest {
    private static final String HEAD = """
            name: "m"
            backend: "python"
            max_batch_size: 4
            input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            """;

    private static ModelConfig parse(String block) {
        return ModelConfigParser.parse(HEAD + block, "m/config.pbtxt", "m");
    }

    private static String invalid(String block) {
        BackplaneException e = assertThrows(BackplaneException.class, () -> parse(block));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
        return e.getMessage();
    }

    private static void assertHas(String message, String part) {
        assertTrue(message.contains(part), () -> "expected '" + part + "' in: " + message);
    }

    @Test
    void parse_oldestWithControls_asTritonWritesIt() {
        ModelConfig c = parse("""
                sequence_batching {
                  max_sequence_idle_microseconds: 5000000
                  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 preserve_ordering: true }
                  control_input [
                    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
                    { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] },
                    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
                    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
                  ]
                  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 2 ]
                            initial_state: [ { name: "zeros" data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } ] } ]
                }
                """);
        SequenceBatching s = c.sequenceBatching();
        assertEquals(SequenceBatching.Strategy.OLDEST, s.strategy());
        assertEquals(5_000_000, s.maxSequenceIdleMicros());
        assertEquals(4, s.maxCandidateSequences());
        assertEquals(List.of(2, 4), s.preferredBatchSizes());
        assertEquals(100, s.maxQueueDelayMicros());
        assertTrue(s.preserveOrdering());
        assertEquals(List.of(new Control("START", ControlKind.CONTROL_SEQUENCE_START, DataType.INT32, List.of(0.0, 1.0)),
                new Control("END", ControlKind.CONTROL_SEQUENCE_END, DataType.FP32, List.of(0.0, 1.0)),
                new Control("READY", ControlKind.CONTROL_SEQUENCE_READY, DataType.BOOL, List.of(0.0, 1.0)),
                new Control("CORRID", ControlKind.CONTROL_SEQUENCE_CORRID, DataType.UINT64, List.of())), s.controls());
        assertEquals("STATE_OUT", s.states().getFirst().outputName());
    }

    @Test
    void parse_emptyBlock_isDirectWithTritonsDefaultIdleTime() {
        SequenceBatching s = parse("sequence_batching { }\n").sequenceBatching();
        assertEquals(SequenceBatching.Strategy.DIRECT, s.strategy());
        assertEquals(SequenceBatching.DEFAULT_IDLE_MICROS, s.maxSequenceIdleMicros());
    }

    @Test
    void parse_badBlocks_eachNamesTheFieldAndWhatToDo() {
        assertHas(invalid("sequence_batching { }\ndynamic_batching { }\n"), "is specified along with field \"inference.ModelConfig.sequence_batching\"");
        assertHas(invalid("""
                sequence_batching { control_input [ { name: "INPUT" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ] }
                """), "control input 'INPUT' is also declared as an input");
        assertHas(invalid("""
                sequence_batching { control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0 ] } ] } ] }
                """), "has 1 false/true values; give exactly two");
        assertHas(invalid("""
                sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ] }
                """), "use TYPE_UINT64");
        assertHas(invalid("sequence_batching { iterative_sequence: true }\n"), "add model_transaction_policy { decoupled: true }");
        assertHas(invalid("""
                sequence_batching { state [ { input_name: "I" output_name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ] }
                """), "state output 'OUTPUT' is also declared as an output");
    }
}
