package io.backplane.plugin.grpc;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.backplane.protocol.ModelVersions;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.TensorFill;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Converts between the protocol's messages and Backplane's values. Inputs come as
 * {@code raw_input_contents} (one entry per input, in input order; zero copy) or as typed
 * {@code contents}; outputs always go back as {@code raw_output_contents}, as Triton sends them.
 */
final class ProtoTensors {
    private ProtoTensors() {
    }

    /** A request plus the shared-memory slices it pinned; {@link #release()} once the response is built. */
    record Parsed(InferenceRequest request, List<SystemSharedMemory.Lease> leases, Map<String, SystemSharedMemory.Lease> shmOutputs) {
        void release() {
            leases.forEach(SystemSharedMemory.Lease::close);
        }
    }

    /** A request whose tensors may name shared-memory regions of {@code shm}. */
    static Parsed toRequest(ModelInferRequest m, SystemSharedMemory shm) {
        List<SystemSharedMemory.Lease> leases = new ArrayList<>();
        try {
            Map<String, SystemSharedMemory.Lease> outs = new HashMap<>();
            for (ModelInferRequest.InferRequestedOutputTensor o : m.getOutputsList()) {
                if (o.containsParameters(SystemSharedMemory.REGION)) {
                    outs.put(o.getName(), lease(shm, o.getParametersMap(), "output '" + o.getName() + "'", leases));
                }
            }
            return new Parsed(toRequest(m, shm, leases), List.copyOf(leases), Map.copyOf(outs));
        } catch (RuntimeException e) {
            leases.forEach(SystemSharedMemory.Lease::close);
            throw e;
        }
    }

    private static SystemSharedMemory.Lease lease(SystemSharedMemory shm, Map<String, InferParameter> p, String what,
            List<SystemSharedMemory.Lease> leases) {
        InferParameter region = p.get(SystemSharedMemory.REGION);
        if (region == null || region.getParameterChoiceCase() != InferParameter.ParameterChoiceCase.STRING_PARAM) {
            throw BackplaneException.invalid(what + ": " + SystemSharedMemory.REGION + " must be a string");
        }
        InferParameter size = p.get(SystemSharedMemory.BYTE_SIZE);
        if (size == null) {
            throw BackplaneException.invalid(what + ": " + SystemSharedMemory.REGION + " needs " + SystemSharedMemory.BYTE_SIZE);
        }
        InferParameter off = p.get(SystemSharedMemory.OFFSET);
        SystemSharedMemory.Lease lease = shm.acquire(region.getStringParam(), off == null ? 0 : integer(off, SystemSharedMemory.OFFSET),
                integer(size, SystemSharedMemory.BYTE_SIZE), what);
        leases.add(lease);
        return lease;
    }

    private static InferenceRequest toRequest(ModelInferRequest m, SystemSharedMemory shm, List<SystemSharedMemory.Lease> leases) {
        if (m.getModelName().isEmpty()) {
            throw BackplaneException.invalid("model_name is empty");
        }
        InferenceRequest.Builder b = InferenceRequest.builder(m.getModelName());
        long version = ModelVersions.parse(m.getModelVersion());
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
                case "sequence_id" -> {
                    // Triton's kinds: uint64 (0 = none) or string; they name different sequences
                    if (p.getParameterChoiceCase() == InferParameter.ParameterChoiceCase.STRING_PARAM) {
                        b.correlationId(p.getStringParam());
                    } else if (p.getParameterChoiceCase() == InferParameter.ParameterChoiceCase.INT64_PARAM && p.getInt64Param() < 0) {
                        throw BackplaneException.invalid("parameter 'sequence_id' must be an unsigned integer or a string, not " + p.getInt64Param());
                    } else {
                        b.correlationId(integer(p, k));
                    }
                }
                case "sequence_start" -> b.sequenceStart(bool(p, k));
                case "sequence_end" -> b.sequenceEnd(bool(p, k));
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
        // Triton checks each input in order, before it counts the raw entries, and words these as it does
        for (ModelInferRequest.InferInputTensor in : m.getInputsList()) {
            if (!in.hasContents()) {
                continue;
            }
            if (in.containsParameters(SystemSharedMemory.REGION)) {
                throw BackplaneException.invalid("unexpected 'content' provided when using shared memory for input tensor '" + in.getName()
                        + "' for model '" + m.getModelName() + "'");
            }
            if (raw > 0) {
                throw BackplaneException.invalid("contents field must not be specified when using raw_input_contents for '" + in.getName()
                        + "' for model '" + m.getModelName() + "'");
            }
        }
        long inBand = m.getInputsList().stream().filter(in -> !in.containsParameters(SystemSharedMemory.REGION)).count();
        if (raw > 0 && raw != inBand) {
            throw BackplaneException.invalid("raw_input_contents has " + raw + " entries but the request has " + inBand
                    + " inputs not in shared memory; give one raw entry per such input, in input order, or use typed contents for all");
        }
        int rawIndex = 0;
        for (int i = 0; i < m.getInputsCount(); i++) {
            ModelInferRequest.InferInputTensor in = m.getInputs(i);
            String name = in.getName();
            DataType type = DataType.fromProtocolName(in.getDatatype());
            long[] shape = new long[in.getShapeCount()];
            for (int d = 0; d < shape.length; d++) {
                shape[d] = in.getShape(d);
            }
            if (in.containsParameters(SystemSharedMemory.REGION)) {
                b.input(SystemSharedMemory.input(lease(shm, in.getParametersMap(), "input '" + name + "'", leases), name, type, shape));
            } else if (raw > 0) {
                MemorySegment data = MemorySegment.ofBuffer(m.getRawInputContents(rawIndex++).asReadOnlyByteBuffer());
                b.input(Tensor.of(name, type, shape, data));
            } else {
                b.input(typed(name, type, shape, in.getContents()));
            }
        }
        for (ModelInferRequest.InferRequestedOutputTensor o : m.getOutputsList()) {
            b.requestOutput(o.getName());
            InferParameter classes = o.getParametersMap().get("classification");
            if (classes != null) {
                b.requestClassification(o.getName(), classCount(integer(classes, "output '" + o.getName() + "' classification")));
            }
        }
        return b.build();
    }

    private static Tensor typed(String name, DataType type, long[] shape, InferTensorContents c) {
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
        if (type == DataType.BYTES) {
            TensorFill.requireElements(name, type, shape, n);
            List<byte[]> els = new ArrayList<>(n);
            for (ByteString s : c.getBytesContentsList()) {
                els.add(s.toByteArray());
            }
            return Tensor.ofBytes(name, shape, els);
        }
        TensorFill fill = TensorFill.of(name, type, shape, n);
        for (int i = 0; i < n; i++) {
            switch (type) {
                case BOOL -> fill.setBoolean(i, c.getBoolContents(i));
                case INT8, INT16, INT32 -> fill.setLong(i, c.getIntContents(i));
                case INT64 -> fill.setLong(i, c.getInt64Contents(i));
                case UINT8, UINT16, UINT32 -> fill.setUnsignedLong(i, Integer.toUnsignedLong(c.getUintContents(i)));
                case UINT64 -> fill.setUnsignedLong(i, c.getUint64Contents(i));
                case FP16, BF16, FP32 -> fill.setDouble(i, c.getFp32Contents(i));
                case FP64 -> fill.setDouble(i, c.getFp64Contents(i));
                case BYTES -> throw new AssertionError("handled above");
            }
        }
        return fill.build();
    }

    private static boolean bool(InferParameter p, String key) {
        if (p.getParameterChoiceCase() != InferParameter.ParameterChoiceCase.BOOL_PARAM) {
            throw BackplaneException.invalid("parameter '" + key + "' must be a bool_param, not " + p.getParameterChoiceCase());
        }
        return p.getBoolParam();
    }

    /** Triton's classification count; any count above the output's size returns every class. */
    static int classCount(long k) {
        return k > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) Math.max(k, Integer.MIN_VALUE);
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
        return toResponse(r, Map.of());
    }

    /** Outputs named in {@code shmOutputs} are written there; their raw entry stays empty, as Triton's clients expect. */
    static ModelInferResponse toResponse(InferenceResponse r, Map<String, SystemSharedMemory.Lease> shmOutputs) {
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
            SystemSharedMemory.Lease lease = shmOutputs.get(t.name());
            if (lease != null) {
                long written = SystemSharedMemory.write(t, lease);
                o.putParameters(SystemSharedMemory.BYTE_SIZE, InferParameter.newBuilder().setInt64Param(written).build());
                b.addRawOutputContents(ByteString.EMPTY);
            } else {
                b.addRawOutputContents(UnsafeByteOperations.unsafeWrap(t.data().asByteBuffer()));
            }
        }
        return b.build();
    }
}
