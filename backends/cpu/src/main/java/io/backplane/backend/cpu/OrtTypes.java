package io.backplane.backend.cpu;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.TensorInfo;
import ai.onnxruntime.TensorInfo.OnnxTensorType;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.util.EnumMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Maps Backplane {@link DataType}s to ONNX element types and creates ONNX Runtime tensors over
 * direct buffers without copying.
 *
 * <p>ONNX Runtime's Java API (1.29) cannot create UINT16, UINT32 or UINT64 tensors: its
 * {@link OnnxJavaType} has no unsigned types wider than a byte, although the native runtime
 * supports them and the Java API reads them back (as INT16/32/64 bits). For those three types
 * this class calls the package-private constructor path the public factories use, by
 * reflection, with the right ONNX element type. If a future ORT version changes those internals,
 * the reflective path reports itself unavailable and such inputs fail with a clear UNSUPPORTED
 * error; every other type keeps working.
 */
final class OrtTypes {
    private static final Map<DataType, OnnxTensorType> ONNX = new EnumMap<>(DataType.class);
    private static final Map<DataType, OnnxJavaType> JAVA = new EnumMap<>(DataType.class);

    static {
        ONNX.put(DataType.BOOL, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL);
        ONNX.put(DataType.UINT8, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8);
        ONNX.put(DataType.UINT16, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16);
        ONNX.put(DataType.UINT32, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32);
        ONNX.put(DataType.UINT64, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64);
        ONNX.put(DataType.INT8, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8);
        ONNX.put(DataType.INT16, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16);
        ONNX.put(DataType.INT32, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
        ONNX.put(DataType.INT64, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64);
        ONNX.put(DataType.FP16, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16);
        ONNX.put(DataType.BF16, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16);
        ONNX.put(DataType.FP32, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
        ONNX.put(DataType.FP64, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE);
        ONNX.put(DataType.BYTES, OnnxTensorType.ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING);

        JAVA.put(DataType.BOOL, OnnxJavaType.BOOL);
        JAVA.put(DataType.UINT8, OnnxJavaType.UINT8);
        JAVA.put(DataType.INT8, OnnxJavaType.INT8);
        JAVA.put(DataType.INT16, OnnxJavaType.INT16);
        JAVA.put(DataType.INT32, OnnxJavaType.INT32);
        JAVA.put(DataType.INT64, OnnxJavaType.INT64);
        JAVA.put(DataType.FP16, OnnxJavaType.FLOAT16);
        JAVA.put(DataType.BF16, OnnxJavaType.BFLOAT16);
        JAVA.put(DataType.FP32, OnnxJavaType.FLOAT);
        JAVA.put(DataType.FP64, OnnxJavaType.DOUBLE);
        // ORT's Java API carries unsigned 16/32/64 as the signed Java type of the same width.
        JAVA.put(DataType.UINT16, OnnxJavaType.INT16);
        JAVA.put(DataType.UINT32, OnnxJavaType.INT32);
        JAVA.put(DataType.UINT64, OnnxJavaType.INT64);
    }

    private OrtTypes() {
    }

    /** The Backplane type of an ONNX element type, or null when the protocol has none (complex, float8). */
    static @Nullable DataType dataType(OnnxTensorType onnxType) {
        for (Map.Entry<DataType, OnnxTensorType> e : ONNX.entrySet()) {
            if (e.getValue() == onnxType) {
                return e.getKey();
            }
        }
        return null;
    }

    /** A short ONNX name for messages, e.g. {@code tensor(float)}. */
    static String onnxName(OnnxTensorType t) {
        String n = t.name().substring("ONNX_TENSOR_ELEMENT_DATA_TYPE_".length()).toLowerCase(java.util.Locale.ROOT);
        return "tensor(" + n + ")";
    }

    /**
     * A tensor over {@code data}, which must be a direct buffer in native (little-endian) order
     * holding exactly the bytes of {@code shape}; ORT reads it in place, so it must stay valid
     * until the tensor is closed. Not for BYTES.
     */
    static OnnxTensor create(OrtEnvironment env, ByteBuffer data, long[] shape, DataType type) throws OrtException {
        if (!data.isDirect()) {
            throw new IllegalArgumentException("expected a direct buffer");
        }
        return switch (type) {
            case UINT16, UINT32, UINT64 -> Unsigned.create(data, shape, type);
            case BYTES -> throw new IllegalArgumentException("BYTES tensors are created from strings");
            default -> OnnxTensor.createTensor(env, data, shape, JAVA.get(type));
        };
    }

    /** Whether ORT tensors of {@code type} can be created as inputs in this runtime. */
    static boolean canCreate(DataType type) {
        return switch (type) {
            case UINT16, UINT32, UINT64 -> Unsigned.AVAILABLE;
            default -> true;
        };
    }

    /** The reflective path for UINT16/32/64 (see the class comment). */
    private static final class Unsigned {
        private static final boolean AVAILABLE;
        private static final @Nullable Method CREATE_FROM_BUFFER;
        private static final @Nullable Constructor<OnnxTensor> TENSOR;
        private static final @Nullable Constructor<TensorInfo> INFO;
        private static final @Nullable Field API_HANDLE;
        private static final @Nullable Field DEFAULT_ALLOCATOR;
        private static final @Nullable Field ALLOCATOR_HANDLE;
        private static final @Nullable Throwable FAILURE;

        static {
            Method create = null;
            Constructor<OnnxTensor> tensor = null;
            Constructor<TensorInfo> info = null;
            Field api = null;
            Field alloc = null;
            Field allocHandle = null;
            Throwable failure = null;
            try {
                create = OnnxTensor.class.getDeclaredMethod("createTensorFromBuffer", long.class, long.class, Buffer.class, int.class,
                        long.class, long[].class, int.class);
                tensor = OnnxTensor.class.getDeclaredConstructor(long.class, long.class, TensorInfo.class, Buffer.class, boolean.class);
                info = TensorInfo.class.getDeclaredConstructor(long[].class, OnnxJavaType.class, OnnxTensorType.class);
                api = Class.forName("ai.onnxruntime.OnnxRuntime", false, OnnxTensor.class.getClassLoader()).getDeclaredField("ortApiHandle");
                alloc = OrtEnvironment.class.getDeclaredField("defaultAllocator");
                allocHandle = Class.forName("ai.onnxruntime.OrtAllocator", false, OnnxTensor.class.getClassLoader()).getDeclaredField("handle");
                create.setAccessible(true);
                tensor.setAccessible(true);
                info.setAccessible(true);
                api.setAccessible(true);
                alloc.setAccessible(true);
                allocHandle.setAccessible(true);
            } catch (ReflectiveOperationException | RuntimeException e) {
                failure = e;
            }
            AVAILABLE = failure == null;
            CREATE_FROM_BUFFER = create;
            TENSOR = tensor;
            INFO = info;
            API_HANDLE = api;
            DEFAULT_ALLOCATOR = alloc;
            ALLOCATOR_HANDLE = allocHandle;
            FAILURE = failure;
        }

        static OnnxTensor create(ByteBuffer data, long[] shape, DataType type) throws OrtException {
            if (!AVAILABLE) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, type + " inputs need ONNX Runtime internals that this ORT version ("
                        + Ort.version() + ") does not have: " + FAILURE, FAILURE);
            }
            try {
                OrtEnvironment env = Ort.environment();
                long apiHandle = API_HANDLE.getLong(null);
                long allocatorHandle = ALLOCATOR_HANDLE.getLong(DEFAULT_ALLOCATOR.get(env));
                OnnxTensorType onnxType = ONNX.get(type);
                TensorInfo info = INFO.newInstance(shape.clone(), JAVA.get(type), onnxType);
                long handle = (long) CREATE_FROM_BUFFER.invoke(null, apiHandle, allocatorHandle, data, data.position(),
                        (long) data.remaining(), shape, onnxType.value);
                return TENSOR.newInstance(handle, allocatorHandle, info, data, false);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof OrtException oe) {
                    throw oe;
                }
                throw BackplaneException.wrap(e.getCause() == null ? e : e.getCause(), "creating a " + type + " tensor");
            } catch (ReflectiveOperationException e) {
                throw BackplaneException.wrap(e, "creating a " + type + " tensor");
            }
        }
    }
}
