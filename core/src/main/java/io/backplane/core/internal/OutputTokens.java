package io.backplane.core.internal;

import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The output tokens a response carries, for {@code HostListener.responseSent}: the value of its
 * {@code num_output_tokens} output (Triton's vLLM backend convention) when that is one integer in
 * host memory, else 1. Reads one element; allocates nothing.
 */
final class OutputTokens {
    /** The output Triton's vLLM backend sends when asked for it. */
    static final String TENSOR = "num_output_tokens";

    private static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private OutputTokens() {
    }

    /** The tokens {@code r} carries: 0 or more from {@code num_output_tokens}, else 1. */
    static long of(InferenceResponse r) {
        for (Tensor t : r.outputs()) {
            if (TENSOR.equals(t.name())) {
                return value(t);
            }
        }
        return 1;
    }

    /** The one integer of {@code t}; 1 when it is not one readable non-negative integer (the response still carried output). */
    private static long value(Tensor t) {
        if (t.elementCount() != 1 || t.memoryType() == MemoryType.GPU) {
            return 1;
        }
        MemorySegment d = t.data();
        try {
            long v = switch (t.dataType()) {
                case UINT32 -> d.byteSize() < 4 ? 1 : Integer.toUnsignedLong(d.get(LE_INT, 0));
                case INT32 -> d.byteSize() < 4 ? 1 : d.get(LE_INT, 0);
                case INT64, UINT64 -> d.byteSize() < 8 ? 1 : d.get(LE_LONG, 0);
                default -> 1;
            };
            return v < 0 ? 1 : v;
        } catch (RuntimeException e) { // a segment no longer alive: count the response, not its figure
            return 1;
        }
    }
}
