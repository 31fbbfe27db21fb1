package io.backplane.tests.zoo;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.tests.zoo.Served.In;
import java.nio.LongBuffer;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/** Requests the conformance runs send to the zoo's BERT, and the check against ONNX Runtime called directly. */
final class ZooRequests {
    private static @Nullable OrtSession bert;

    private ZooRequests() {
    }

    /** A BERT request of one sequence whose length (3 to 10 tokens) and ids follow from {@code tag}. */
    static InferenceRequest bert(String model, long tag) {
        int length = 3 + Math.floorMod(tag, 8);
        long[] ids = new long[length];
        long[] mask = new long[length];
        for (int i = 0; i < length; i++) {
            ids[i] = Math.floorMod(tag * 31 + i * 7, Zoo.VOCABULARY);
            mask[i] = i < length - Math.floorMod(tag, 3) ? 1 : 0;
        }
        return InferenceRequest.builder(model).input(Tensor.ofLongs("input_ids", new long[] {1, length}, ids))
                .input(Tensor.ofLongs("attention_mask", new long[] {1, length}, mask)).build();
    }

    /** A request with a token id past the vocabulary: valid to the core, an error in the model's embedding lookup. */
    static InferenceRequest outOfVocabulary(String model, long tag) {
        return InferenceRequest.builder(model).input(Tensor.ofLongs("input_ids", new long[] {1, 3}, 1, Zoo.VOCABULARY + tag, 2))
                .input(Tensor.ofLongs("attention_mask", new long[] {1, 3}, 1, 1, 1)).build();
    }

    /** The ONNX BERT of the zoo, run directly on this request alone. */
    static synchronized Map<String, float[]> direct(InferenceRequest request) throws Exception {
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        if (bert == null) {
            bert = env.createSession(Zoo.repository().resolve(Zoo.BERT).resolve("1/model.onnx").toString());
        }
        List<In> inputs = request.inputs().stream().map(t -> new In(t.name(), "INT64", t.shape(), t.toLongArray())).toList();
        return ZooServedTest.ort(env, bert, inputs);
    }

    static void check(InferenceRequest request, List<InferenceResponse> responses) {
        try {
            Map<String, float[]> got = new LinkedHashMap<>();
            for (String name : List.of("last_hidden_state", "pooler_output")) {
                got.put(name, responses.getFirst().output(name).toFloatArray());
            }
            ZooServedTest.assertClose(direct(request), got, "request " + request.id());
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }
}
