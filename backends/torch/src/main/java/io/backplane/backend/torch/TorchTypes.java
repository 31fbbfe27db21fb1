package io.backplane.backend.torch;

import io.backplane.spi.DataType;
import org.jspecify.annotations.Nullable;

/** Backplane's tensor types and DJL's names for libtorch's, for the types both have. */
final class TorchTypes {
    private TorchTypes() {
    }

    /** DJL's type for a Backplane type, or null where libtorch has none this backend can exchange. */
    static ai.djl.ndarray.types.@Nullable DataType toDjl(DataType t) {
        return switch (t) {
            case BOOL -> ai.djl.ndarray.types.DataType.BOOLEAN;
            case UINT8 -> ai.djl.ndarray.types.DataType.UINT8;
            case INT8 -> ai.djl.ndarray.types.DataType.INT8;
            case INT16 -> ai.djl.ndarray.types.DataType.INT16;
            case INT32 -> ai.djl.ndarray.types.DataType.INT32;
            case INT64 -> ai.djl.ndarray.types.DataType.INT64;
            case FP16 -> ai.djl.ndarray.types.DataType.FLOAT16;
            case BF16 -> ai.djl.ndarray.types.DataType.BFLOAT16;
            case FP32 -> ai.djl.ndarray.types.DataType.FLOAT32;
            case FP64 -> ai.djl.ndarray.types.DataType.FLOAT64;
            // libtorch 2.7 has only partial kernels for uint16/32/64; strings travel as List[str], which is not a tensor
            case UINT16, UINT32, UINT64, BYTES -> null;
        };
    }

    /** The Backplane type of a DJL type, or null. */
    static @Nullable DataType fromDjl(ai.djl.ndarray.types.DataType t) {
        for (DataType d : DataType.values()) {
            if (toDjl(d) == t) {
                return d;
            }
        }
        return null;
    }

    /** The types a model may declare, for errors. */
    static final String SUPPORTED = "TYPE_BOOL, TYPE_UINT8, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_BF16, TYPE_FP32, TYPE_FP64";
}
