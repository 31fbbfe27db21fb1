package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufInputStream;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The Open Inference Protocol's JSON inference request and response, with Triton's binary
 * tensor extension: the body starts with {@code Inference-Header-Content-Length} bytes of JSON,
 * followed by the raw bytes of every input whose {@code parameters.binary_data_size} is set, in
 * input order. Outputs requested with {@code parameters.binary_data=true} (or all, with the
 * request parameter {@code binary_data_output=true}) come back the same way.
 */
final class InferCodec {
    /** The binary tensor extension's header: how many leading body bytes are the JSON header. */
    static final io.netty.util.AsciiString HEADER_LENGTH = io.netty.util.AsciiString.cached("Inference-Header-Content-Length");
    /** Request parameters the frontend consumes rather than forwarding to the model. */
    private static final java.util.Set<String> RESERVED = java.util.Set.of("binary_data_output", "priority", "timeout", "sequence_id",
            "sequence_start", "sequence_end");

    private InferCodec() {
    }

    /** A parsed request plus how its outputs must be written. */
    record Parsed(InferenceRequest request, boolean binaryAll, Map<String, Boolean> binaryByOutput,
            List<SystemSharedMemory.Lease> leases, Map<String, ShmOutput> shmOutputs) {
        /** Releases the shared-memory slices this request pinned; call once the response is written. */
        void release() {
            leases.forEach(SystemSharedMemory.Lease::close);
        }

        boolean binary(String output) {
            Boolean b = binaryByOutput.get(output);
            return b != null ? b : binaryAll;
        }
    }

    static JsonNode readJson(ByteBuf buf) {
        if (buf.readableBytes() == 0) {
            throw BackplaneException.invalid("the request body is empty; a JSON object was expected");
        }
        try {
            JsonNode n = Json.MAPPER.readTree(new ByteBufInputStream(buf.duplicate()));
            if (n == null || n.isMissingNode()) {
                throw BackplaneException.invalid("the request body is empty; a JSON object was expected");
            }
            return n;
        } catch (com.fasterxml.jackson.core.exc.StreamConstraintsException e) {
            throw constraint(e);
        } catch (JsonParseException e) {
            throw BackplaneException.invalid("malformed JSON in the request body: " + e.getOriginalMessage()
                    + " at line " + e.getLocation().getLineNr() + ", column " + e.getLocation().getColumnNr());
        } catch (IOException e) {
            throw BackplaneException.invalid("unreadable request body: " + e.getMessage());
        }
    }

    /**
     * Triton's raw binary request ({@code Inference-Header-Content-Length: 0}): the whole body is
     * the bytes of the model's one input, whose shape is deduced from the config (a batching
     * model gets a batch of 1; at most one variable dimension, found from the byte count; a BYTES
     * input must have shape [1] and the body is its one element). Every output comes back binary.
     * The refusals use Triton's words, which its clients and QA match.
     */
    static Parsed parseRaw(String model, long version, ByteBuf body, ModelConfig config) {
        List<TensorConfig> ins = config.inputs();
        if (ins.size() != 1) {
            throw BackplaneException.invalid("Raw request must only have 1 input (found 1) to be deduced but got " + ins.size() + " inputs in '"
                    + model + "' model configuration; send the inference header (Inference-Header-Content-Length > 0) to name the inputs");
        }
        TensorConfig in = ins.getFirst();
        String name = in.name();
        List<Long> dims = in.dims();
        int batch = config.batches() ? 1 : 0;
        long[] shape = new long[dims.size() + batch];
        if (batch == 1) {
            shape[0] = 1;
        }
        int variable = -1;
        long known = 1;
        for (int i = 0; i < dims.size(); i++) {
            long d = dims.get(i);
            if (d < 0) {
                if (variable >= 0) {
                    throw BackplaneException.invalid("The shape of the raw input '" + name + "' can not be deduced because there are more than"
                            + " one variable-sized dimension (dims " + dims + "); send the inference header with the input's shape");
                }
                variable = batch + i;
            } else {
                known = Math.multiplyExact(known, d);
            }
            shape[batch + i] = d;
        }
        int n = body.readableBytes();
        byte[] bytes = new byte[n];
        body.getBytes(body.readerIndex(), bytes);
        InferenceRequest.Builder b = InferenceRequest.builder(model);
        if (version != InferenceRequest.LATEST) {
            b.version(version);
        }
        if (in.dataType() == DataType.BYTES) {
            if (variable >= 0 || known != 1) {
                throw BackplaneException.invalid("For BYTE datatype raw input '" + name + "', the model must have input shape [1] (its dims are "
                        + dims + "); send the inference header with the input's shape");
            }
            b.input(Tensor.ofBytes(name, shape, List.of(bytes)));
        } else {
            long unit = Math.multiplyExact(known, in.dataType().byteSize());
            if (variable >= 0) {
                if (unit == 0 || n % unit != 0) {
                    throw BackplaneException.invalid("raw input '" + name + "': " + n + " bytes are not a whole number of " + in.dataType()
                            + " elements of dims " + dims + " (" + unit + " bytes per step of the variable dimension)");
                }
                shape[variable] = n / unit;
            } else if (n != unit) {
                throw BackplaneException.invalid("raw input '" + name + "': " + n + " bytes, but dims " + dims + " of " + in.dataType()
                        + " need " + unit + " bytes");
            }
            b.input(Tensor.of(name, in.dataType(), shape, MemorySegment.ofArray(bytes)));
        }
        return new Parsed(b.build(), true, Map.of(), List.of(), Map.of());
    }

    /** A body past one of {@link Json#FACTORY}'s limits: the nesting depth in Triton's words (its QA matches them). */
    static BackplaneException constraint(com.fasterxml.jackson.core.exc.StreamConstraintsException e) {
        String m = String.valueOf(e.getOriginalMessage());
        if (m.contains("nesting depth")) {
            return BackplaneException.invalid("JSON nesting depth exceeds maximum allowed limit (" + Json.MAX_NESTING_DEPTH + "): " + m);
        }
        return BackplaneException.invalid("the request body passes a limit of the JSON reader: " + m);
    }

    /** An output the client asked to receive in a shared-memory region. */
    record ShmOutput(String region, long offset, SystemSharedMemory.Lease lease) {
    }

    /**
     * Parses an infer request body.
     *
     * @param headerLength the {@code Inference-Header-Content-Length} value, or -1 when absent
     * @param shm the regions inputs and outputs may name; the slices used are leased into the result
     */
    static Parsed parse(String model, long version, ByteBuf body, int headerLength, SystemSharedMemory shm) {
        List<SystemSharedMemory.Lease> leases = new ArrayList<>();
        try {
            return parse(model, version, body, headerLength, shm, leases);
        } catch (RuntimeException e) {
            leases.forEach(SystemSharedMemory.Lease::close);
            throw e;
        }
    }

    private static Parsed parse(String model, long version, ByteBuf body, int headerLength, SystemSharedMemory shm,
            List<SystemSharedMemory.Lease> leases) {
        ByteBuf json;
        ByteBuf binary;
        if (headerLength >= 0) {
            if (headerLength > body.readableBytes()) {
                throw BackplaneException.invalid("Inference-Header-Content-Length " + headerLength + " exceeds the body length "
                        + body.readableBytes());
            }
            json = body.slice(body.readerIndex(), headerLength);
            binary = body.slice(body.readerIndex() + headerLength, body.readableBytes() - headerLength);
        } else {
            json = body;
            binary = Unpooled.EMPTY_BUFFER;
        }
        JsonNode root = readJson(json);
        if (!root.isObject()) {
            throw BackplaneException.invalid("the inference request must be a JSON object, not " + root.getNodeType());
        }
        InferenceRequest.Builder b = InferenceRequest.builder(model);
        if (version != InferenceRequest.LATEST) {
            b.version(version);
        }
        JsonNode id = root.get("id");
        if (id != null && !id.isNull()) {
            b.id(id.asText());
        }
        boolean binaryAll = false;
        JsonNode params = root.get("parameters");
        if (params != null && !params.isNull()) {
            if (!params.isObject()) {
                throw BackplaneException.invalid("'parameters' must be a JSON object");
            }
            for (Map.Entry<String, JsonNode> e : params.properties()) {
                String k = e.getKey();
                JsonNode v = e.getValue();
                switch (k) {
                    case "binary_data_output" -> binaryAll = bool(v, k);
                    case "priority" -> b.priority((int) integer(v, k));
                    case "timeout" -> b.timeoutMicros(integer(v, k));
                    case "sequence_id" -> sequenceId(b, v);
                    case "sequence_start" -> b.sequenceStart(bool(v, k));
                    case "sequence_end" -> b.sequenceEnd(bool(v, k));
                    default -> b.parameter(k, scalar(v, "parameter '" + k + "'"));
                }
            }
        }
        JsonNode inputs = root.get("inputs");
        if (inputs == null || !inputs.isArray()) {
            throw BackplaneException.invalid("the inference request needs an 'inputs' array");
        }
        int offset = 0;
        for (JsonNode in : inputs) {
            String name = text(in, "name", "input");
            DataType type = DataType.fromProtocolName(text(in, "datatype", "input '" + name + "'"));
            long[] shape = shape(in.get("shape"), name);
            JsonNode ip = in.get("parameters");
            JsonNode size = ip == null ? null : ip.get("binary_data_size");
            JsonNode region = ip == null ? null : ip.get(SystemSharedMemory.REGION);
            Tensor t;
            if (region != null) {
                String what = "input '" + name + "'";
                SystemSharedMemory.Lease lease = lease(shm, ip, region, what, leases);
                t = SystemSharedMemory.input(lease, name, type, shape);
            } else if (size != null) {
                long n = integer(size, "input '" + name + "' binary_data_size");
                if (n < 0 || n > binary.readableBytes() - offset) {
                    throw BackplaneException.invalid("input '" + name + "': binary_data_size " + n + " but only "
                            + (binary.readableBytes() - offset) + " bytes of binary data remain (truncated payload?)");
                }
                byte[] bytes = new byte[(int) n];
                binary.getBytes(binary.readerIndex() + offset, bytes);
                offset += (int) n;
                t = Tensor.of(name, type, shape, MemorySegment.ofArray(bytes));
            } else {
                JsonNode data = in.get("data");
                if (data == null) {
                    throw BackplaneException.invalid("input '" + name + "' has neither 'data' nor parameters.binary_data_size");
                }
                t = TensorJson.toTensor(name, type, shape, TensorJson.flatten(data));
            }
            b.input(t);
        }
        if (offset != binary.readableBytes()) {
            throw BackplaneException.invalid("the body has " + (binary.readableBytes() - offset)
                    + " bytes of binary data that no input's binary_data_size accounts for");
        }
        Map<String, Boolean> perOutput = new HashMap<>();
        Map<String, ShmOutput> shmOutputs = new HashMap<>();
        JsonNode outputs = root.get("outputs");
        if (outputs != null && !outputs.isNull()) {
            if (!outputs.isArray()) {
                throw BackplaneException.invalid("'outputs' must be a JSON array");
            }
            for (JsonNode o : outputs) {
                String name = text(o, "name", "requested output");
                b.requestOutput(name);
                JsonNode op = o.get("parameters");
                JsonNode classes = op == null ? null : op.get("classification");
                if (classes != null) {
                    long k = integer(classes, "output '" + name + "' classification");
                    b.requestClassification(name, k > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) Math.max(k, Integer.MIN_VALUE));
                }
                JsonNode bd = op == null ? null : op.get("binary_data");
                if (bd != null) {
                    perOutput.put(name, bool(bd, "output '" + name + "' binary_data"));
                }
                JsonNode region = op == null ? null : op.get(SystemSharedMemory.REGION);
                if (region != null) {
                    SystemSharedMemory.Lease lease = lease(shm, op, region, "output '" + name + "'", leases);
                    long off = op.has(SystemSharedMemory.OFFSET) ? integer(op.get(SystemSharedMemory.OFFSET), "output '" + name + "' " + SystemSharedMemory.OFFSET) : 0;
                    shmOutputs.put(name, new ShmOutput(region.asText(), off, lease));
                }
            }
        }
        return new Parsed(b.build(), binaryAll, perOutput, List.copyOf(leases), Map.copyOf(shmOutputs));
    }

    private static SystemSharedMemory.Lease lease(SystemSharedMemory shm, JsonNode params, JsonNode region, String what,
            List<SystemSharedMemory.Lease> leases) {
        if (!region.isTextual()) {
            throw BackplaneException.invalid(what + ": " + SystemSharedMemory.REGION + " must be a string");
        }
        JsonNode size = params.get(SystemSharedMemory.BYTE_SIZE);
        if (size == null) {
            throw BackplaneException.invalid(what + ": " + SystemSharedMemory.REGION + " needs " + SystemSharedMemory.BYTE_SIZE);
        }
        JsonNode off = params.get(SystemSharedMemory.OFFSET);
        long offset = off == null ? 0 : integer(off, what + " " + SystemSharedMemory.OFFSET);
        SystemSharedMemory.Lease lease = shm.acquire(region.asText(), offset, integer(size, what + " " + SystemSharedMemory.BYTE_SIZE), what);
        leases.add(lease);
        return lease;
    }

    /** A written infer response: the body and, when binary outputs follow the JSON, the JSON length. */
    record Encoded(ByteBuf body, int headerLength) {
    }

    static Encoded encode(InferenceResponse r, Parsed how) {
        for (Tensor t : r.outputs()) {
            if (t.memoryType() == io.backplane.spi.MemoryType.GPU) {
                throw BackplaneException.internal("model '" + r.modelName() + "' returned output '" + t.name()
                        + "' in GPU memory; the http frontend needs host tensors (the backend must copy outputs to host memory)");
            }
        }
        ByteBuf head = Unpooled.buffer(256);
        List<Tensor> binaries = new ArrayList<>();
        try (JsonGenerator g = Json.generator(head)) {
            g.writeStartObject();
            g.writeStringField("model_name", r.modelName());
            g.writeStringField("model_version", Long.toString(r.modelVersion()));
            if (!r.requestId().isEmpty()) {
                g.writeStringField("id", r.requestId());
            }
            writeParameters(g, r.parameters());
            g.writeArrayFieldStart("outputs");
            for (Tensor t : r.outputs()) {
                g.writeStartObject();
                g.writeStringField("name", t.name());
                g.writeStringField("datatype", t.dataType().protocolName());
                g.writeArrayFieldStart("shape");
                for (long d : t.shape()) {
                    g.writeNumber(d);
                }
                g.writeEndArray();
                ShmOutput so = how.shmOutputs().get(t.name());
                if (so != null) {
                    long written = SystemSharedMemory.write(t, so.lease());
                    g.writeObjectFieldStart("parameters");
                    g.writeStringField(SystemSharedMemory.REGION, so.region());
                    g.writeNumberField(SystemSharedMemory.BYTE_SIZE, written);
                    if (so.offset() != 0) {
                        g.writeNumberField(SystemSharedMemory.OFFSET, so.offset());
                    }
                    g.writeEndObject();
                } else if (how.binary(t.name())) {
                    g.writeObjectFieldStart("parameters");
                    g.writeNumberField("binary_data_size", t.byteSize());
                    g.writeEndObject();
                    binaries.add(t);
                } else {
                    g.writeFieldName("data");
                    TensorJson.writeData(g, t);
                }
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeEndObject();
        } catch (IOException e) {
            head.release();
            throw new java.io.UncheckedIOException(e);
        }
        if (binaries.isEmpty()) {
            return new Encoded(head, -1);
        }
        int headerLength = head.readableBytes();
        CompositeByteBuf all = Unpooled.compositeBuffer(binaries.size() + 1);
        all.addComponent(true, head);
        for (Tensor t : binaries) {
            all.addComponent(true, Unpooled.wrappedBuffer(t.data().asByteBuffer()));
        }
        return new Encoded(all, headerLength);
    }

    static void writeParameters(JsonGenerator g, Map<String, Object> params) throws IOException {
        if (params.isEmpty()) {
            return;
        }
        g.writeObjectFieldStart("parameters");
        for (Map.Entry<String, Object> e : params.entrySet()) {
            g.writeFieldName(e.getKey());
            switch (e.getValue()) {
                case String s -> g.writeString(s);
                case Long l -> g.writeNumber(l);
                case Boolean bo -> g.writeBoolean(bo);
                case Double d -> g.writeNumber(d);
                default -> g.writeString(String.valueOf(e.getValue()));
            }
        }
        g.writeEndObject();
    }

    /**
     * Triton's generate extension: every top-level field but {@code parameters} and {@code id} is
     * an input of the model, given as a JSON scalar or array; its datatype and shape come from
     * the model's config (a batching model gets a batch dimension of 1).
     */
    static InferenceRequest parseGenerate(String model, long version, JsonNode root, ModelConfig config) {
        if (!root.isObject()) {
            throw BackplaneException.invalid("the generate request must be a JSON object, not " + root.getNodeType());
        }
        InferenceRequest.Builder b = InferenceRequest.builder(model);
        if (version != InferenceRequest.LATEST) {
            b.version(version);
        }
        for (Map.Entry<String, JsonNode> e : root.properties()) {
            String k = e.getKey();
            JsonNode v = e.getValue();
            if (k.equals("parameters")) {
                if (!v.isObject()) {
                    throw BackplaneException.invalid("'parameters' must be a JSON object");
                }
                for (Map.Entry<String, JsonNode> p : v.properties()) {
                    b.parameter(p.getKey(), scalar(p.getValue(), "parameter '" + p.getKey() + "'"));
                }
                continue;
            }
            if (k.equals("id")) {
                b.id(v.asText());
                continue;
            }
            TensorConfig tc = config.input(k);
            if (tc == null) {
                throw BackplaneException.invalid("generate: '" + k + "' is not an input of model '" + model + "'; its inputs are "
                        + config.inputs().stream().map(TensorConfig::name).toList());
            }
            List<JsonNode> values = TensorJson.flatten(v);
            long[] shape = generateShape(tc, values.size(), config.batches());
            b.input(TensorJson.toTensor(k, tc.dataType(), shape, values));
        }
        return b.build();
    }

    private static long[] generateShape(TensorConfig tc, int n, boolean batches) {
        List<Long> dims = tc.dims();
        long known = 1;
        int variable = 0;
        for (long d : dims) {
            if (d < 0) {
                variable++;
            } else {
                known *= d;
            }
        }
        long[] shape = new long[dims.size() + (batches ? 1 : 0)];
        int o = 0;
        if (batches) {
            shape[o++] = 1;
        }
        for (long d : dims) {
            if (d >= 0) {
                shape[o++] = d;
            } else if (variable == 1 && known > 0 && n % known == 0) {
                shape[o++] = n / known;
            } else {
                shape[o++] = variable == 1 ? -2 : 1;
            }
        }
        long product = 1;
        for (long d : shape) {
            product = d < 0 ? -1 : product * d;
            if (product < 0) {
                break;
            }
        }
        if (dims.isEmpty() && n == 1 && !batches) {
            return new long[0];
        }
        if (product != n) {
            throw BackplaneException.invalid("generate: input '" + tc.name() + "' has " + n + " element(s), which do not fit its dims "
                    + dims);
        }
        return shape;
    }

    private static String text(JsonNode obj, String field, String what) {
        JsonNode v = obj.get(field);
        if (v == null || !v.isTextual()) {
            throw BackplaneException.invalid(what + " needs a string '" + field + "'" + (v == null ? "" : ", not " + v));
        }
        return v.textValue();
    }

    private static long[] shape(JsonNode n, String input) {
        if (n == null || !n.isArray()) {
            throw BackplaneException.invalid("input '" + input + "' needs a 'shape' array");
        }
        long[] s = new long[n.size()];
        for (int i = 0; i < s.length; i++) {
            JsonNode d = n.get(i);
            if (!d.isIntegralNumber() || d.longValue() < 0) {
                throw BackplaneException.invalid("input '" + input + "': shape " + n + " has an invalid dimension " + d
                        + "; dimensions are integers ≥ 0");
            }
            s[i] = d.longValue();
        }
        return s;
    }

    private static boolean bool(JsonNode v, String what) {
        if (!v.isBoolean()) {
            throw BackplaneException.invalid(what + " must be true or false, not " + v);
        }
        return v.booleanValue();
    }

    /** Triton's {@code sequence_id}: an unsigned 64-bit number (0 = none) or a string; the two kinds name different sequences. */
    private static void sequenceId(InferenceRequest.Builder b, JsonNode v) {
        if (v.isTextual()) {
            b.correlationId(v.textValue());
        } else if (v.isIntegralNumber() && v.bigIntegerValue().signum() >= 0 && v.bigIntegerValue().bitLength() <= 64) {
            b.correlationId(v.bigIntegerValue().longValue());
        } else {
            throw BackplaneException.invalid("parameter 'sequence_id' must be an unsigned 64-bit integer or a string, not " + v);
        }
    }

    private static long integer(JsonNode v, String what) {
        if (!v.isIntegralNumber() || !v.canConvertToLong()) {
            throw BackplaneException.invalid(what + " must be an integer, not " + v);
        }
        return v.longValue();
    }

    private static Object scalar(JsonNode v, String what) {
        if (v.isTextual()) {
            return v.textValue();
        }
        if (v.isBoolean()) {
            return v.booleanValue();
        }
        if (v.isIntegralNumber() && v.canConvertToLong()) {
            return v.longValue();
        }
        if (v.isNumber()) {
            return v.doubleValue();
        }
        throw BackplaneException.invalid(what + " must be a string, number or boolean, not " + v);
    }

    static boolean reserved(String parameter) {
        return RESERVED.contains(parameter);
    }
}
