package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.InferenceService;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * {@code POST /v1/embeddings} over an embedding model: each input string is one request whose
 * {@code text_input} holds it (shaped as the model declares it, so a dynamic batcher batches the
 * inputs), and the model's {@code embedding} output (else its first floating-point output),
 * flattened, is the vector: a list of floats, or base64 of little-endian float32 as OpenAI sends
 * with {@code encoding_format: "base64"}.
 */
final class Embeddings {
    private final InferenceService service;
    private final ModelFiles files;
    private final java.util.concurrent.Executor work;

    Embeddings(InferenceService service, ModelFiles files, java.util.concurrent.Executor work) {
        this.service = requireNonNull(service, "service is null");
        this.files = requireNonNull(files, "files is null");
        this.work = requireNonNull(work, "work is null");
    }

    void serve(JsonNode body, Exchange ex) {
        String model = OpenAiHandler.text(body, "model", true);
        ModelConfig config;
        try {
            config = service.modelConfig(model, InferenceRequest.LATEST);
        } catch (io.backplane.spi.BackplaneException e) {
            if (e.code() == io.backplane.spi.ErrorCode.NOT_FOUND) {
                throw ApiError.modelNotFound(model).failure();
            }
            throw e;
        }
        TensorConfig in = config.input(LlmConvention.TEXT_INPUT);
        if (in == null || in.dataType() != DataType.BYTES) {
            throw ApiError.invalid("model '" + model + "' does not take embedding requests: it declares no input '" + LlmConvention.TEXT_INPUT
                    + "' of TYPE_STRING", "model").failure();
        }
        if (config.decoupled()) {
            throw ApiError.invalid("model '" + model + "' is decoupled; an embedding model answers each request once", "model").failure();
        }
        String format = body.hasNonNull("encoding_format") ? body.get("encoding_format").asText() : "float";
        if (!format.equals("float") && !format.equals("base64")) {
            throw ApiError.invalid("'encoding_format' is '" + format + "'; give \"float\" or \"base64\"", "encoding_format").failure();
        }
        if (body.hasNonNull("dimensions")) {
            throw ApiError.invalid("'dimensions' is not supported: the model's output has the size it has; leave it out", "dimensions").failure();
        }
        List<String> inputs = inputs(body.get("input"));
        TokenCounter counter = files.of(model, config).counter();
        List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
        for (String s : inputs) {
            InferenceRequest r = InferenceRequest.builder(model).input(LlmConvention.tensor(model, in, config.batches(), s)).build();
            futures.add(service.infer(r));
        }
        ex.onAbort(e -> {
            futures.forEach(f -> f.cancel(true));
            ex.fail(ApiError.of(e));
        });
        io.netty.util.concurrent.GenericFutureListener<io.netty.channel.ChannelFuture> onClose = f -> futures.forEach(x -> x.cancel(true));
        ex.channel().closeFuture().addListener(onClose);
        ex.whenEnded(() -> ex.channel().closeFuture().removeListener(onClose));
        // answered on a worker: counting the inputs' tokens never runs on the thread that delivers the host's responses
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).whenCompleteAsync((v, t) -> {
            if (t != null) {
                ex.fail(ApiError.of(t));
                return;
            }
            try {
                ObjectNode root = Json.MAPPER.createObjectNode();
                root.put("object", "list");
                ArrayNode data = root.putArray("data");
                for (int i = 0; i < futures.size(); i++) {
                    ObjectNode o = data.addObject();
                    o.put("object", "embedding");
                    o.put("index", i);
                    float[] vector = vector(model, futures.get(i).join());
                    if (format.equals("float")) {
                        ArrayNode a = o.putArray("embedding");
                        for (float f : vector) {
                            a.add(f);
                        }
                    } else {
                        ByteBuffer b = ByteBuffer.allocate(vector.length * 4).order(ByteOrder.LITTLE_ENDIAN);
                        for (float f : vector) {
                            b.putFloat(f);
                        }
                        o.put("embedding", Base64.getEncoder().encodeToString(b.array()));
                    }
                }
                root.put("model", model);
                long tokens = 0;
                if (counter != null) {
                    try {
                        for (String s : inputs) {
                            tokens += counter.count(s, true);
                        }
                    } catch (RuntimeException e) {
                        tokens = 0; // a tokenizer closed by a reload: the vectors go out without the count
                    }
                }
                root.putObject("usage").put("prompt_tokens", tokens).put("total_tokens", tokens);
                ex.reply(root);
            } catch (ApiError.Failure f) {
                ex.fail(f.error());
            } catch (RuntimeException e) {
                ex.fail(ApiError.of(e));
            }
        }, work);
    }

    private static List<String> inputs(JsonNode input) {
        List<String> out = new ArrayList<>();
        if (input != null && input.isTextual()) {
            out.add(input.asText());
        } else if (input != null && input.isArray() && !input.isEmpty()) {
            for (JsonNode s : input) {
                if (!s.isTextual()) {
                    throw ApiError.invalid("'input' must be a string or a list of strings; token ids are not supported: send text", "input").failure();
                }
                out.add(s.asText());
            }
        } else {
            throw ApiError.invalid("'input' must be a string or a non-empty list of strings", "input").failure();
        }
        if (out.size() > 2048) {
            throw ApiError.invalid("'input' has " + out.size() + " strings; send at most 2048 per request", "input").failure();
        }
        return out;
    }

    private static float[] vector(String model, InferenceResponse r) {
        Tensor t = r.output("embedding");
        if (t == null) {
            for (Tensor o : r.outputs()) {
                if (o.dataType() == DataType.FP32 || o.dataType() == DataType.FP16 || o.dataType() == DataType.BF16 || o.dataType() == DataType.FP64) {
                    t = o;
                    break;
                }
            }
        }
        if (t == null) {
            throw new ApiError(500, "model '" + model + "' answered without an 'embedding' output or any floating-point output", "server_error", null, null)
                    .failure();
        }
        if (t.dataType() == DataType.FP64) {
            double[] d = t.toDoubleArray();
            float[] f = new float[d.length];
            for (int i = 0; i < d.length; i++) {
                f[i] = (float) d[i];
            }
            return f;
        }
        return t.toFloatArray();
    }
}
