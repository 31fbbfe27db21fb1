package io.backplane.plugin.openai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Triton's LLM tensor convention, as Triton's OpenAI frontend speaks it to vLLM- and
 * TensorRT-LLM-style models: a generation request becomes {@code text_input} (the prompt),
 * {@code stream}, {@code sampling_parameters} (the request's sampling fields as JSON),
 * {@code exclude_input_in_output}, {@code return_num_input_tokens} and {@code return_num_output_tokens}
 * (vLLM's form), or the per-field form of TensorRT-LLM ({@code max_tokens}, {@code temperature},
 * {@code top_p}, {@code top_k}, {@code frequency_penalty}, {@code presence_penalty}, {@code seed} or
 * {@code random_seed}, {@code stop_words}); the answer is {@code text_output}, with
 * {@code num_input_tokens} and {@code num_output_tokens} when the model counts.
 *
 * <p>A model is sent exactly the inputs its config declares, shaped as declared ({@code [1]} as
 * vLLM's backend declares them, {@code [1, 1]} as TensorRT-LLM's models do, a leading batch
 * dimension of 1 where {@code max_batch_size > 0}) and in the declared data type: never an input it
 * does not declare, an optional one only when the request has a value for it. A required input the
 * convention has no value for fails the request with 400 naming it.
 */
final class LlmConvention {
    static final String TEXT_INPUT = "text_input";
    static final String TEXT_OUTPUT = "text_output";
    static final String NUM_INPUT_TOKENS = "num_input_tokens";
    static final String NUM_OUTPUT_TOKENS = "num_output_tokens";

    /**
     * The request fields that go into {@code sampling_parameters}: OpenAI's sampling fields and the extensions vLLM's
     * OpenAI server takes (as {@code extra_body}). Any other field stays out, as Triton's frontend (a pydantic model of
     * the request) leaves out what it does not know: vLLM's backend builds its {@code SamplingParams} from the JSON and
     * refuses a name it does not know.
     */
    private static final Set<String> SAMPLING = Set.of("temperature", "top_p", "top_k", "min_p", "stop", "seed", "presence_penalty",
            "frequency_penalty", "repetition_penalty", "min_tokens", "ignore_eos", "best_of", "length_penalty", "stop_token_ids",
            "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output", "logit_bias");

    private LlmConvention() {
    }

    /**
     * One generation.
     *
     * @param prompt the text to continue (a chat's rendered template)
     * @param stream whether the client streams
     * @param echo whether the answer starts with the prompt ({@code exclude_input_in_output = !echo})
     * @param maxTokens the most tokens to generate
     * @param request the OpenAI request, for its sampling fields
     */
    record Generation(String prompt, boolean stream, boolean echo, int maxTokens, JsonNode request) {
    }

    /** Whether {@code config} follows the convention: a {@code text_input} of strings in, a {@code text_output} out (when it declares outputs). */
    static boolean generative(ModelConfig config) {
        TensorConfig t = config.input(TEXT_INPUT);
        return t != null && t.dataType() == DataType.BYTES && (config.outputs().isEmpty() || config.output(TEXT_OUTPUT) != null);
    }

    /** The request for {@code g} to model {@code model}, whose config is {@code config}. */
    static InferenceRequest request(String model, ModelConfig config, Generation g, String id) {
        if (!generative(config)) {
            throw ApiError.invalid("model '" + model + "' does not take text generation requests: Triton's LLM convention asks for an input '" + TEXT_INPUT
                    + "' of TYPE_STRING and an output '" + TEXT_OUTPUT + "'; its inputs are " + names(config.inputs()) + " and its outputs "
                    + names(config.outputs()), "model").failure();
        }
        InferenceRequest.Builder b = InferenceRequest.builder(model).id(id);
        JsonNode r = g.request();
        for (TensorConfig t : config.inputs()) {
            Object value = switch (t.name()) {
                case TEXT_INPUT -> g.prompt();
                case "stream", "streaming" -> g.stream();
                case "sampling_parameters" -> samplingParameters(r, g.maxTokens());
                case "exclude_input_in_output" -> !g.echo();
                case "return_num_input_tokens", "return_num_output_tokens" -> Boolean.TRUE;
                case "max_tokens" -> g.maxTokens();
                case "temperature", "top_p", "frequency_penalty", "presence_penalty", "repetition_penalty" -> number(r, t.name());
                case "top_k", "min_tokens" -> number(r, t.name());
                case "seed", "random_seed" -> number(r, "seed");
                case "stop_words", "stop" -> stops(r);
                default -> null;
            };
            if (value == null) {
                if (t.optional()) {
                    continue;
                }
                throw ApiError.invalid("model '" + model + "' requires input '" + t.name() + "', which the OpenAI API has no value for"
                        + (t.name().equals("stop_words") || t.name().equals("seed") || t.name().equals("random_seed") ? " in this request" : "")
                        + "; declare it optional in the model's config, or send the request through /v2/models/" + model + "/infer", null).failure();
            }
            b.input(tensor(model, t, config.batches(), value));
        }
        return b.build();
    }

    /** The request's sampling fields (those of {@link #SAMPLING} it sets) as JSON, with {@code max_tokens}: what vLLM's backend reads. */
    static String samplingParameters(JsonNode request, int maxTokens) {
        ObjectNode out = Json.MAPPER.createObjectNode();
        for (Map.Entry<String, JsonNode> e : request.properties()) {
            if (SAMPLING.contains(e.getKey()) && !e.getValue().isNull()) {
                out.set(e.getKey(), e.getValue());
            }
        }
        out.put("max_tokens", maxTokens);
        return out.toString();
    }

    private static @Nullable Number number(JsonNode r, String field) {
        JsonNode v = r.get(field);
        if (v == null || v.isNull()) {
            return null;
        }
        if (!v.isNumber()) {
            throw ApiError.invalid("'" + field + "' must be a number, not " + v, field).failure();
        }
        return v.numberValue();
    }

    private static @Nullable List<String> stops(JsonNode r) {
        JsonNode v = r.get("stop");
        if (v == null || v.isNull()) {
            return null;
        }
        List<String> out = new ArrayList<>();
        if (v.isTextual()) {
            out.add(v.asText());
        } else if (v.isArray()) {
            for (JsonNode s : v) {
                if (!s.isTextual()) {
                    throw ApiError.invalid("'stop' must be a string or a list of strings; element " + s + " is not a string", "stop").failure();
                }
                out.add(s.asText());
            }
        } else {
            throw ApiError.invalid("'stop' must be a string or a list of strings, not " + v, "stop").failure();
        }
        return out.isEmpty() ? null : out;
    }

    /** {@code value} as input {@code t}: its declared type, its declared shape (a batch of one where the model batches). */
    static Tensor tensor(String model, TensorConfig t, boolean batches, Object value) {
        List<?> elements = value instanceof List<?> l ? l : List.of(value);
        int n = elements.size();
        List<Long> dims = t.dims();
        long[] shape = new long[dims.size() + (batches ? 1 : 0)];
        int at = 0;
        if (batches) {
            shape[at++] = 1;
        }
        boolean wildcard = false;
        long product = 1;
        for (long d : dims) {
            long v = d;
            if (d < 0) {
                v = wildcard ? 1 : n;
                wildcard = true;
            }
            shape[at++] = v;
            product *= v;
        }
        if (product != n) {
            throw ApiError.invalid("model '" + model + "' declares input '" + t.name() + "' with dims " + dims + ", which cannot hold " + n
                    + " value(s); declare a variable dimension (-1)", null).failure();
        }
        DataType type = t.dataType();
        if (type == DataType.BYTES) {
            String[] s = new String[n];
            for (int i = 0; i < n; i++) {
                s[i] = String.valueOf(elements.get(i));
            }
            return Tensor.ofStrings(t.name(), shape, s);
        }
        ByteBuffer buf = ByteBuffer.allocate(Math.multiplyExact(n, type.byteSize())).order(ByteOrder.LITTLE_ENDIAN);
        for (Object e : elements) {
            put(model, t, buf, e);
        }
        return Tensor.ofRaw(t.name(), type, shape, buf.array());
    }

    private static void put(String model, TensorConfig t, ByteBuffer buf, Object e) {
        Number num = e instanceof Boolean b ? (b ? 1 : 0) : e instanceof Number x ? x : null;
        if (num == null) {
            throw ApiError.invalid("model '" + model + "' declares input '" + t.name() + "' as " + t.dataType() + ", which cannot take " + e, null).failure();
        }
        switch (t.dataType()) {
            case BOOL -> buf.put((byte) (num.doubleValue() != 0 ? 1 : 0));
            case INT8, UINT8 -> buf.put(num.byteValue());
            case INT16, UINT16 -> buf.putShort(num.shortValue());
            case INT32, UINT32 -> buf.putInt(num.intValue());
            case INT64, UINT64 -> buf.putLong(num.longValue());
            case FP32 -> buf.putFloat(num.floatValue());
            case FP64 -> buf.putDouble(num.doubleValue());
            case FP16 -> buf.putShort(Float.floatToFloat16(num.floatValue()));
            case BF16 -> buf.putShort(Tensor.toBf16Bits(num.floatValue()));
            default -> throw ApiError.invalid("model '" + model + "' declares input '" + t.name() + "' as " + t.dataType()
                    + ", which the OpenAI frontend cannot fill", null).failure();
        }
    }

    /** The text a response carries: its {@code text_output} strings joined; empty when it has none. */
    static String text(InferenceResponse r) {
        Tensor t = r.output(TEXT_OUTPUT);
        if (t == null || t.dataType() != DataType.BYTES) {
            return "";
        }
        List<byte[]> parts = t.toBytesList();
        if (parts.size() == 1) {
            return new String(parts.getFirst(), StandardCharsets.UTF_8);
        }
        StringBuilder sb = new StringBuilder();
        for (byte[] p : parts) {
            sb.append(new String(p, StandardCharsets.UTF_8));
        }
        return sb.toString();
    }

    /** The first element of an integer output (a token count), or -1 when the response has none. */
    static long count(InferenceResponse r, String name) {
        Tensor t = r.output(name);
        if (t == null || t.elementCount() < 1) {
            return -1;
        }
        return switch (t.dataType()) {
            case UINT32 -> Integer.toUnsignedLong(t.toIntArray()[0]);
            case INT32 -> t.toIntArray()[0];
            case INT64, UINT64 -> t.toLongArray()[0];
            default -> -1;
        };
    }

    private static List<String> names(List<TensorConfig> ts) {
        return ts.stream().map(TensorConfig::name).toList();
    }
}
