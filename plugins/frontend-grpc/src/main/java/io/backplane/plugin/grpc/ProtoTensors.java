package io.backplane.plugin.grpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.backplane.plugin.grpc.proto.InferParameter;
import io.backplane.plugin.grpc.proto.InferTensorContents;
import io.backplane.plugin.grpc.proto.ModelInferRequest;
import io.backplane.plugin.grpc.proto.ModelInferResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Converts between the protocol's messages and Backplane's values. Inputs come as
 * {@code raw_input_contents} (one entry per input, in input order; zero copy) or as typed
 * {@code contents}; outputs always go back as {@code raw_output_contents}, as Triton sends them.
 */
final class ProtoTensors {
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private ProtoTensors() {
    }

    static long version(String v) {
        if (v.isEmpty()) {
            return InferenceRequest.LATEST;
        }
        try {
            long n = Long.parseLong(v);
            if (n >= 1) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw BackplaneException.invalid("model version '" + v + "' is invalid: versions are integers ≥ 1, or empty for the latest");
    }

    static InferenceRequest toRequest(ModelInferRequest m) {
        if (m.getModelName().isEmpty()) {
            throw BackplaneException.invalid("model_name is empty");
        }
        InferenceRequest.Builder b = InferenceRequest.builder(m.getModelName());
        long version = version(m.getModelVersion());
        if (version != InferenceRequest.LATEST) {
            b.version(version);
        }
        b.id(m.getId());
        for (Map.Entry<String, InferParameter> e : m.getParametersMap().entrySet()) {
            String k = e.getKey();
            InferParameter p = e.getValue();
            switch (k) {
                case "priority" -> b.priority(Math.toIntExact(integer(p, k)));
                case "timeout" -> b.timeoutMicros(integer(p, k));
                case "sequence_id" -> b.correlationId(p.getParameterChoiceCase() == InferParameter.ParameterChoiceCase.STRING_PARAM
                        ? p.getStringParam() : Long.toString(integer(p, k)));
                case "triton_enable_empty_final_response" -> {
                    // consumed by the stream handler
                }
                default -> {
                    Object v = value(p);
                    if (v != null) {
                        b.parameter(k, v);
                    }
                }
            }
        }
        int raw = m.getRawInputContentsCount();
        if (raw > 0 && raw != m.getInputsCount()) {
            throw BackplaneException.invalid("raw_input_contents has " + raw + " entries but the request has " + m.getInputsCount()
                    + " inputs; give one raw entry per input, in input order, or use typed contents for all");
        }
        for (int i = 0; i < m.getInputsCount(); i++) {
            ModelInferRequest.InferInputTensor in = m.getInputs(i);
            String name = in.getName();
            DataType type = DataType.fromProtocolName(in.getDatatype());
            long[] shape = new long[in.getShapeCount()];
            for (int d = 0; d < shape.length; d++) {
                shape[d] = in.getShape(d);
            }
            if (raw > 0) {
                if (in.hasContents()) {
                    throw BackplaneException.invalid("input '" + name + "' has typed contents although raw_input_contents is used");
                }
                MemorySegment data = MemorySegment.ofBuffer(m.getRawInputContents(i).asReadOnlyByteBuffer());
                b.input(Tensor.of(name, type, shape, data));
            } else {
                b.input(typed(name, type, shape, in.getContents()));
            }
        }
        for (ModelInferRequest.InferRequestedOutputTensor o : m.getOutputsList()) {
            b.requestOutput(o.getName());
        }
        return b.build();
    }

    private static Tensor typed(String name, DataType type, long[] shape, InferTensorContents c) {
        long expected = Tensor.elementCount(name, shape);
        int n = switch (type) {
            case BOOL -> c.getBoolContentsCount();
            case INT8, INT16, INT32 -> c.getIntContentsCount();
            case INT64 -> c.getInt64ContentsCount();
            case UINT8, UINT16, UINT32 -> c.getUintContentsCount();
            case UINT64 -> c.getUint64ContentsCount();
            case FP16, BF16, FP32 -> c.getFp32ContentsCount();
            case FP64 -> c.getFp64ContentsCount();
            case BYTES -> c.getBytesContentsCount();
        };
        if (n != expected) {
            throw BackplaneException.invalid("input '" + name + "': shape " + java.util.Arrays.toString(shape) + " needs " + expected + " "
                    + type + " elements but the typed contents hold " + n + " (check the datatype and the contents field used)");
        }
        if (type == DataType.BYTES) {
            List<byte[]> els = new ArrayList<>(n);
            for (ByteString s : c.getBytesContentsList()) {
                els.add(s.toByteArray());
            }
            return Tensor.ofBytes(name, shape, els);
        }
        MemorySegment s = MemorySegment.ofArray(new byte[Math.multiplyExact(n, type.byteSize())]);
        for (int i = 0; i < n; i++) {
            switch (type) {
                case BOOL -> s.set(ValueLayout.JAVA_BYTE, i, (byte) (c.getBoolContents(i) ? 1 : 0));
                case INT8 -> s.set(ValueLayout.JAVA_BYTE, i, (byte) range(name, c.getIntContents(i), Byte.MIN_VALUE, Byte.MAX_VALUE));
                case INT16 -> s.setAtIndex(SHORT, i, (short) range(name, c.getIntContents(i), Short.MIN_VALUE, Short.MAX_VALUE));
                case INT32 -> s.setAtIndex(INT, i, c.getIntContents(i));
                case INT64 -> s.setAtIndex(LONG, i, c.getInt64Contents(i));
                case UINT8 -> s.set(ValueLayout.JAVA_BYTE, i, (byte) range(name, Integer.toUnsignedLong(c.getUintContents(i)), 0, 255));
                case UINT16 -> s.setAtIndex(SHORT, i, (short) range(name, Integer.toUnsignedLong(c.getUintContents(i)), 0, 65535));
                case UINT32 -> s.setAtIndex(INT, i, c.getUintContents(i));
                case UINT64 -> s.setAtIndex(LONG, i, c.getUint64Contents(i));
                case FP16 -> s.setAtIndex(SHORT, i, Float.floatToFloat16(c.getFp32Contents(i)));
                case BF16 -> s.setAtIndex(SHORT, i, Tensor.toBf16Bits(c.getFp32Contents(i)));
                case FP32 -> s.setAtIndex(FLOAT, i, c.getFp32Contents(i));
                case FP64 -> s.setAtIndex(DOUBLE, i, c.getFp64Contents(i));
                case BYTES -> throw new AssertionError("handled above");
            }
        }
        return Tensor.of(name, type, shape, s);
    }

    private static long range(String name, long v, long min, long max) {
        if (v < min || v > max) {
            throw BackplaneException.invalid("input '" + name + "': value " + v + " is outside [" + min + ", " + max + "]");
        }
        return v;
    }

    private static long integer(InferParameter p, String key) {
        return switch (p.getParameterChoiceCase()) {
            case INT64_PARAM -> p.getInt64Param();
            case UINT64_PARAM -> p.getUint64Param();
            default -> throw BackplaneException.invalid("parameter '" + key + "' must be an integer, not " + p.getParameterChoiceCase());
        };
    }

    private static Object value(InferParameter p) {
        return switch (p.getParameterChoiceCase()) {
            case BOOL_PARAM -> p.getBoolParam();
            case INT64_PARAM -> p.getInt64Param();
            case UINT64_PARAM -> p.getUint64Param();
            case STRING_PARAM -> p.getStringParam();
            case DOUBLE_PARAM -> p.getDoubleParam();
            case PARAMETERCHOICE_NOT_SET -> throw BackplaneException.invalid("a request parameter has no value set");
        };
    }

    static InferParameter parameter(Object v) {
        InferParameter.Builder b = InferParameter.newBuilder();
        switch (v) {
            case Boolean bo -> b.setBoolParam(bo);
            case Long l -> b.setInt64Param(l);
            case Double d -> b.setDoubleParam(d);
            default -> b.setStringParam(String.valueOf(v));
        }
        return b.build();
    }

    static ModelInferResponse toResponse(InferenceResponse r) {
        ModelInferResponse.Builder b = ModelInferResponse.newBuilder().setModelName(r.modelName())
                .setModelVersion(Long.toString(r.modelVersion())).setId(r.requestId());
        for (Map.Entry<String, Object> e : r.parameters().entrySet()) {
            b.putParameters(e.getKey(), parameter(e.getValue()));
        }
        for (Tensor t : r.outputs()) {
            if (t.memoryType() == io.backplane.spi.MemoryType.GPU) {
                throw BackplaneException.internal("model '" + r.modelName() + "' returned output '" + t.name()
                        + "' in GPU memory; the grpc frontend needs host tensors (the backend must copy outputs to host memory)");
            }
            ModelInferResponse.InferOutputTensor.Builder o = b.addOutputsBuilder().setName(t.name()).setDatatype(t.dataType().protocolName());
            for (long d : t.shape()) {
                o.addShape(d);
            }
            b.addRawOutputContents(UnsafeByteOperations.unsafeWrap(t.data().asByteBuffer()));
        }
        return b.build();
    }
}
