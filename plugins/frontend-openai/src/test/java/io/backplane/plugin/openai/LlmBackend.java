package io.backplane.plugin.openai;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Test backend "llm": models written to Triton's LLM convention, in Java.
 * <ul>
 *   <li>{@link #vllm}: decoupled, vLLM's declarations ([1] each; sampling parameters as JSON;
 *       token counts when asked). The answer is {@code "you said: <prompt>"}, one word per token
 *       (with its leading space), at most {@code max_tokens} of them; streamed one response per
 *       token, else one response. A prompt containing {@code FAIL_MID} fails after two tokens
 *       with an error response; one containing {@code FOREVER} streams until it is cancelled (its
 *       tag goes to {@link #cancelled}, with the count sent).
 *   <li>{@link #trtllm}: decoupled, TensorRT-LLM's per-field form with dims [1, 1]: required
 *       {@code text_input}, {@code max_tokens}, {@code stream}; optional {@code temperature},
 *       {@code top_p}, {@code stop_words}; no token counts.
 *   <li>{@link #embedding}: plain, batching ({@code max_batch_size} 8), {@code text_input} [1] to
 *       {@code embedding} FP32 [4]: the text's length, its first code point, 1 and -1.
 * </ul>
 * Every request's inputs (name, type, shape, value) go to {@link #seen}.
 */
final class LlmBackend implements BackendFactory {
    static final String NAME = "llm";
    static final long PATIENCE_SECONDS = 60;

    /** One input as a model received it. */
    record Input(String name, DataType type, List<Long> shape, String value) {
    }

    final BlockingQueue<Map<String, Input>> seen = new LinkedBlockingQueue<>();
    final BlockingQueue<String> started = new LinkedBlockingQueue<>();
    final BlockingQueue<String> cancelled = new LinkedBlockingQueue<>();
    final List<String> problems = new CopyOnWriteArrayList<>();

    static ModelConfig vllm(String name) {
        return ModelConfig.builder(name).backend(NAME).decoupled(true)
                .input(TensorConfig.of("text_input", DataType.BYTES, 1))
                .input(TensorConfig.builder("stream", DataType.BOOL).dims(1).optional(true).build())
                .input(TensorConfig.builder("sampling_parameters", DataType.BYTES).dims(1).optional(true).build())
                .input(TensorConfig.builder("exclude_input_in_output", DataType.BOOL).dims(1).optional(true).build())
                .input(TensorConfig.builder("return_num_input_tokens", DataType.BOOL).dims(1).optional(true).build())
                .input(TensorConfig.builder("return_num_output_tokens", DataType.BOOL).dims(1).optional(true).build())
                .output(TensorConfig.of("text_output", DataType.BYTES, -1))
                .output(TensorConfig.of("num_input_tokens", DataType.UINT32, 1))
                .output(TensorConfig.of("num_output_tokens", DataType.UINT32, 1))
                .parameter("mode", "vllm").build();
    }

    static ModelConfig trtllm(String name) {
        return ModelConfig.builder(name).backend(NAME).decoupled(true)
                .input(TensorConfig.of("text_input", DataType.BYTES, 1, 1))
                .input(TensorConfig.of("max_tokens", DataType.INT32, 1, 1))
                .input(TensorConfig.of("stream", DataType.BOOL, 1, 1))
                .input(TensorConfig.builder("temperature", DataType.FP32).dims(1, 1).optional(true).build())
                .input(TensorConfig.builder("top_p", DataType.FP32).dims(1, 1).optional(true).build())
                .input(TensorConfig.builder("stop_words", DataType.BYTES).dims(1, -1).optional(true).build())
                .output(TensorConfig.of("text_output", DataType.BYTES, 1, -1))
                .parameter("mode", "trtllm").build();
    }

    static ModelConfig embedding(String name) {
        return ModelConfig.builder(name).backend(NAME).maxBatchSize(8)
                .input(TensorConfig.of("text_input", DataType.BYTES, 1))
                .output(TensorConfig.of("embedding", DataType.FP32, 4))
                .parameter("mode", "embedding").build();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                String mode = ctx.config().parameters().getOrDefault("mode", "vllm");
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) {
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) throws Exception {
                                for (ScheduledRequest r : batch) {
                                    Map<String, Input> in = record(r);
                                    if (mode.equals("embedding")) {
                                        String text = in.get("text_input").value();
                                        r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofFloats("embedding", new long[] {1, 4},
                                                text.length(), text.isEmpty() ? 0 : text.codePointAt(0), 1, -1))));
                                    } else {
                                        generate(r, in, mode.equals("vllm"));
                                    }
                                }
                            }

                            @Override
                            public void close() {
                            }
                        };
                    }

                    @Override
                    public void close() {
                    }
                };
            }

            @Override
            public void close() {
            }
        };
    }

    private Map<String, Input> record(ScheduledRequest r) {
        Map<String, Input> in = new LinkedHashMap<>();
        for (Tensor t : r.request().inputs()) {
            String value = switch (t.dataType()) {
                case BYTES -> String.join("|", t.toStringList());
                case BOOL -> Arrays.toString(t.toBooleanArray());
                case FP32 -> Arrays.toString(t.toFloatArray());
                case INT32, UINT32 -> Arrays.toString(t.toIntArray());
                case INT64, UINT64 -> Arrays.toString(t.toLongArray());
                default -> t.dataType().name();
            };
            in.put(t.name(), new Input(t.name(), t.dataType(), Arrays.stream(t.shape()).boxed().toList(), value));
        }
        seen.add(in);
        return in;
    }

    private void generate(ScheduledRequest r, Map<String, Input> in, boolean vllm) throws Exception {
        String prompt = in.get("text_input").value();
        started.add(prompt);
        boolean stream = in.containsKey("stream") && in.get("stream").value().contains("true");
        int maxTokens;
        if (vllm) {
            Input sp = in.get("sampling_parameters");
            JsonNode params = sp == null ? Json.MAPPER.createObjectNode() : Json.MAPPER.readTree(sp.value());
            maxTokens = params.path("max_tokens").asInt(16);
        } else {
            maxTokens = Integer.parseInt(in.get("max_tokens").value().replaceAll("[\\[\\]]", ""));
        }
        boolean counts = vllm && in.containsKey("return_num_output_tokens");
        int promptTokens = prompt.split(" ").length;
        ResponseSender sender = r.sender();
        if (prompt.contains("FOREVER")) {
            forever(r, prompt, counts, promptTokens);
            return;
        }
        List<String> words = new ArrayList<>();
        for (String w : ("you said: " + prompt).split(" ")) {
            words.add(words.isEmpty() ? w : " " + w);
        }
        List<String> tokens = words.subList(0, Math.min(maxTokens, words.size()));
        if (!stream) {
            sender.sendFinal(response(String.join("", tokens), counts, promptTokens, tokens.size()));
            return;
        }
        for (int i = 0; i < tokens.size(); i++) {
            if (i == 2 && prompt.contains("FAIL_MID")) {
                sender.sendFinal(InferenceResponse.error(new BackplaneException(ErrorCode.INTERNAL, "the model failed mid-stream (FAIL_MID)")));
                return;
            }
            awaitReady(r);
            sender.send(response(tokens.get(i), counts, promptTokens, 1), 0);
        }
        sender.send(null, ResponseSender.FINAL);
    }

    private void forever(ScheduledRequest r, String prompt, boolean counts, int promptTokens) throws Exception {
        int n = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(PATIENCE_SECONDS);
        while (!r.isCancelled()) {
            if (System.nanoTime() > deadline) {
                problems.add("stream '" + prompt + "' was never cancelled; it sent " + n + " tokens");
                r.sender().sendError(new BackplaneException(ErrorCode.INTERNAL, "never cancelled"));
                return;
            }
            awaitReady(r);
            if (r.isCancelled() || r.sender().isClosed()) {
                break;
            }
            try {
                r.sender().send(response(" t" + n, counts, promptTokens, 1), 0);
            } catch (IllegalStateException closed) {
                break; // the host ended the request between the check and the send (an unload failed it)
            }
            n++;
        }
        cancelled.add(prompt + " after " + n);
        if (!r.sender().isClosed()) {
            r.sender().sendError(new BackplaneException(ErrorCode.CANCELLED, "cancelled after " + n + " tokens"));
        }
    }

    private static void awaitReady(ScheduledRequest r) throws Exception {
        try {
            r.sender().ready().toCompletableFuture().get(PATIENCE_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new IllegalStateException("the client did not read for " + PATIENCE_SECONDS + " s", e);
        }
    }

    private static InferenceResponse response(String text, boolean counts, int promptTokens, int outputTokens) {
        List<Tensor> out = new ArrayList<>();
        out.add(Tensor.ofBytes("text_output", new long[] {1}, List.of(text.getBytes(StandardCharsets.UTF_8))));
        if (counts) {
            out.add(Tensor.ofRaw("num_input_tokens", DataType.UINT32, new long[] {1}, le(promptTokens)));
            out.add(Tensor.ofRaw("num_output_tokens", DataType.UINT32, new long[] {1}, le(outputTokens)));
        }
        return InferenceResponse.of(out);
    }

    private static byte[] le(int v) {
        return new byte[] {(byte) v, (byte) (v >> 8), (byte) (v >> 16), (byte) (v >> 24)};
    }
}
