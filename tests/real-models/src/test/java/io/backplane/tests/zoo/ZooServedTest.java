package io.backplane.tests.zoo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.tests.zoo.Served.In;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The small zoo served by a real host over REST and gRPC with dynamic batching: BERT (ONNX, ragged
 * sequence lengths in one batch), ResNet (ONNX) and the torch BERT (python backend). Each model's
 * batcher is set to gather exactly 4 rows (preferred_batch_size 4, a long queue delay as a
 * deadline), 4 rows are sent at once, the statistics show they ran as one batch, and every answer
 * equals the model run directly on that request alone: ONNX Runtime's Java API for the ONNX models,
 * torch in the model environment for the python one.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(300)
class ZooServedTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Batched and single runs may differ in the last bits (other kernels' blocking); the models' outputs are O(1). */
    private static final float TOLERANCE = 2e-4f;

    private Path temp;
    private Served served;
    private OrtEnvironment env;
    private OrtSession bert;
    private OrtSession resnet;
    private ExecutorService pool;

    @BeforeAll
    void start(@TempDir Path dir) throws Exception {
        temp = dir;
        Path repo = Zoo.copy(temp, ZooServedTest::gatherFour, Zoo.BERT, Zoo.RESNET, Zoo.BERT_TORCH);
        env = OrtEnvironment.getEnvironment();
        bert = env.createSession(repo.resolve(Zoo.BERT).resolve("1/model.onnx").toString());
        resnet = env.createSession(repo.resolve(Zoo.RESNET).resolve("1/model.onnx").toString());
        served = Served.start(repo);
        pool = Executors.newFixedThreadPool(4);
    }

    @AfterAll
    void stop() throws Exception {
        if (pool != null) {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS), "client threads still running");
        }
        if (served != null) {
            served.close();
        }
        if (bert != null) {
            bert.close();
        }
        if (resnet != null) {
            resnet.close();
        }
    }

    /** The zoo's config with a batcher that sends a batch when 4 rows are queued (or after 20 s, a deadline). */
    static String gatherFour(String config) {
        String c = config.replaceAll("max_queue_delay_microseconds: \\d+", "max_queue_delay_microseconds: 20000000")
                .replaceAll("preferred_batch_size: \\[[^]]*]", "preferred_batch_size: [ 4 ]");
        if (!c.contains("preferred_batch_size")) {
            c = c.replace("dynamic_batching {", "dynamic_batching {\n  preferred_batch_size: [ 4 ]");
        }
        return c;
    }

    // ---- inputs

    /** A BERT request: {@code rows} sequences of {@code length} tokens, the last {@code padded} of each masked out. */
    static List<In> bertRequest(Random random, int rows, int length, int padded) {
        long[] ids = new long[rows * length];
        long[] mask = new long[rows * length];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = random.nextInt(Zoo.VOCABULARY);
            mask[i] = i % length < length - padded ? 1 : 0;
        }
        return List.of(new In("input_ids", "INT64", new long[] {rows, length}, ids), new In("attention_mask", "INT64", new long[] {rows, length}, mask));
    }

    static List<In> image(Random random) {
        float[] v = new float[3 * Zoo.IMAGE * Zoo.IMAGE];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) random.nextGaussian();
        }
        return List.of(new In("input", "FP32", new long[] {1, 3, Zoo.IMAGE, Zoo.IMAGE}, v));
    }

    /** Four rows of BERT requests of three sequence lengths (one request of two rows), so one batch holds three shapes. */
    static List<List<In>> raggedBert(long seed) {
        Random random = new Random(seed);
        return List.of(bertRequest(random, 1, 5, 0), bertRequest(random, 2, 9, 3), bertRequest(random, 1, 16, 6));
    }

    // ---- references: the model called directly on one request

    static Map<String, float[]> ort(OrtEnvironment env, OrtSession session, List<In> inputs) throws Exception {
        Map<String, OnnxTensor> feeds = new LinkedHashMap<>();
        try {
            for (In in : inputs) {
                feeds.put(in.name(), in.values() instanceof long[] v ? OnnxTensor.createTensor(env, LongBuffer.wrap(v), in.shape())
                        : OnnxTensor.createTensor(env, java.nio.FloatBuffer.wrap((float[]) in.values()), in.shape()));
            }
            Map<String, float[]> out = new LinkedHashMap<>();
            try (OrtSession.Result r = session.run(feeds)) {
                for (var e : r) {
                    java.nio.FloatBuffer b = ((OnnxTensor) e.getValue()).getFloatBuffer();
                    float[] v = new float[b.remaining()];
                    b.get(v);
                    out.put(e.getKey(), v);
                }
            }
            return out;
        } finally {
            feeds.values().forEach(OnnxTensor::close);
        }
    }

    static void assertClose(Map<String, float[]> expected, Map<String, float[]> actual, String what) {
        assertEquals(expected.keySet(), actual.keySet(), what + ": outputs");
        for (var e : expected.entrySet()) {
            float[] want = e.getValue();
            float[] got = actual.get(e.getKey());
            assertEquals(want.length, got.length, what + ": " + e.getKey() + " length");
            for (int i = 0; i < want.length; i++) {
                if (!(Math.abs(want[i] - got[i]) <= TOLERANCE * Math.max(1, Math.abs(want[i])))) {
                    fail(what + ": " + e.getKey() + "[" + i + "] is " + got[i] + ", the direct run gives " + want[i]);
                }
            }
        }
    }

    /** Sends every request at once, each on its own client thread; the answers in request order. */
    private List<Map<String, float[]>> concurrently(List<Callable<Map<String, float[]>>> calls) throws Exception {
        List<Future<Map<String, float[]>>> futures = new ArrayList<>();
        for (Callable<Map<String, float[]>> c : calls) {
            futures.add(pool.submit(c));
        }
        List<Map<String, float[]>> out = new ArrayList<>();
        for (Future<Map<String, float[]>> f : futures) {
            out.add(f.get(120, TimeUnit.SECONDS));
        }
        return out;
    }

    /** Runs {@code requests} (4 rows together) at once and checks they ran as one batch of the model. */
    private List<Map<String, float[]>> oneBatch(String model, List<List<In>> requests, boolean grpc) throws Exception {
        long[] before = served.counts(model);
        List<Callable<Map<String, float[]>>> calls = new ArrayList<>();
        for (List<In> r : requests) {
            calls.add(grpc ? () -> served.grpc(model, r) : () -> served.rest(model, r));
        }
        List<Map<String, float[]>> answers = concurrently(calls);
        long[] after = served.counts(model);
        assertEquals(4, after[0] - before[0], model + ": rows inferred");
        assertEquals(1, after[1] - before[1], model + ": the 4 rows should have run as one batch (executions)");
        return answers;
    }

    @Test
    void bert_raggedBatch_overRestAndGrpc_equalsOrtOnEachRequestAlone() throws Exception {
        for (boolean grpc : new boolean[] {false, true}) {
            List<List<In>> requests = raggedBert(grpc ? 2 : 1);
            List<Map<String, float[]>> answers = oneBatch(Zoo.BERT, requests, grpc);
            for (int i = 0; i < requests.size(); i++) {
                assertClose(ort(env, bert, requests.get(i)), answers.get(i), (grpc ? "gRPC" : "REST") + " bert request " + i);
            }
        }
    }

    @Test
    void bert_paddedRowsKeepTheirRealPositions() throws Exception {
        // The attention mask does its job in the served model: a sequence padded with masked tokens gives,
        // at its real positions, what the unpadded sequence gives (what a client padding its batch relies on).
        Random random = new Random(7);
        List<In> padded = bertRequest(random, 1, 12, 4);
        long[] ids = (long[]) padded.get(0).values();
        List<In> plain = List.of(new In("input_ids", "INT64", new long[] {1, 8}, java.util.Arrays.copyOf(ids, 8)),
                new In("attention_mask", "INT64", new long[] {1, 8}, filled(8)));
        List<Map<String, float[]>> answers = oneBatch(Zoo.BERT, List.of(padded, plain, bertRequest(random, 1, 3, 0), bertRequest(random, 1, 3, 0)),
                false);
        float[] paddedHidden = answers.get(0).get("last_hidden_state");
        float[] plainHidden = answers.get(1).get("last_hidden_state");
        assertClose(Map.of("h", plainHidden), Map.of("h", java.util.Arrays.copyOf(paddedHidden, 8 * Zoo.HIDDEN)), "real positions");
        assertClose(Map.of("p", answers.get(1).get("pooler_output")), Map.of("p", answers.get(0).get("pooler_output")), "pooler");
    }

    private static long[] filled(int n) {
        long[] v = new long[n];
        java.util.Arrays.fill(v, 1);
        return v;
    }

    @Test
    void resnet_batchOfFour_overRestAndGrpc_equalsOrtOnEachImageAlone() throws Exception {
        for (boolean grpc : new boolean[] {false, true}) {
            Random random = new Random(grpc ? 12 : 11);
            List<List<In>> images = List.of(image(random), image(random), image(random), image(random));
            List<Map<String, float[]>> answers = oneBatch(Zoo.RESNET, images, grpc);
            for (int i = 0; i < images.size(); i++) {
                Map<String, float[]> want = ort(env, resnet, images.get(i));
                assertEquals(Zoo.CLASSES, want.get("logits").length);
                assertClose(want, answers.get(i), (grpc ? "gRPC" : "REST") + " resnet image " + i);
            }
        }
    }

    @Test
    void torchBert_raggedBatch_overRestAndGrpc_equalsTorchDirectly_andTheOnnxExport() throws Exception {
        List<List<In>> rest = raggedBert(3);
        List<List<In>> grpc = raggedBert(4);
        List<Map<String, float[]>> answers = new ArrayList<>(oneBatch(Zoo.BERT_TORCH, rest, false));
        answers.addAll(oneBatch(Zoo.BERT_TORCH, grpc, true));
        List<List<In>> all = new ArrayList<>(rest);
        all.addAll(grpc);
        List<Map<String, float[]>> torch = torchReference(all); // one python process for both
        for (int i = 0; i < all.size(); i++) {
            String what = (i < rest.size() ? "REST" : "gRPC") + " torch bert request " + i;
            assertClose(torch.get(i), answers.get(i), what + " vs torch directly");
            assertClose(ort(env, bert, all.get(i)), answers.get(i), what + " vs the ONNX export of the same weights");
        }
    }

    /** torch's BertModel on each request alone, in the model environment (torch_reference.py). */
    private List<Map<String, float[]>> torchReference(List<List<In>> requests) throws Exception {
        var root = JSON.createArrayNode();
        for (List<In> r : requests) {
            var req = root.addObject();
            for (In in : r) {
                var n = req.putObject(in.name());
                n.putPOJO("shape", in.shape());
                n.putPOJO("data", in.values());
            }
        }
        Path input = Files.writeString(temp.resolve("torch-inputs.json"), root.toString());
        Path script = Zoo.root().resolve("tests/real-models/src/test/python/torch_reference.py");
        Zoo.Run run = Zoo.run(List.of(Zoo.python().toString(), script.toString(), Zoo.repository().resolve(Zoo.BERT_TORCH).resolve("1").toString(),
                input.toString()), 300);
        assertEquals(0, run.exit(), "torch_reference.py failed:\n" + run.output());
        String last = run.output().lines().filter(l -> l.startsWith("[")).reduce((a, b) -> b).orElseThrow(() -> new AssertionError(run.output()));
        List<Map<String, float[]>> out = new ArrayList<>();
        for (JsonNode r : JSON.readTree(last)) {
            Map<String, float[]> m = new LinkedHashMap<>();
            for (String name : List.of("last_hidden_state", "pooler_output")) {
                JsonNode d = r.get(name);
                float[] v = new float[d.size()];
                for (int i = 0; i < v.length; i++) {
                    v[i] = (float) d.get(i).asDouble();
                }
                m.put(name, v);
            }
            out.add(m);
        }
        return out;
    }

    @Test
    void badRequestsInABatch_failAlone_theOthersAnswered() throws Exception {
        // one batch of 4 rows: a token id past the vocabulary (ONNX Runtime's Gather fails), input_ids and
        // attention_mask of different lengths (ORT fails), and two good requests that must still be answered
        List<In> outOfVocabulary = List.of(new In("input_ids", "INT64", new long[] {1, 3}, new long[] {1, Zoo.VOCABULARY + 5, 2}),
                new In("attention_mask", "INT64", new long[] {1, 3}, filled(3)));
        List<In> mismatched = List.of(new In("input_ids", "INT64", new long[] {1, 3}, new long[] {1, 2, 3}),
                new In("attention_mask", "INT64", new long[] {1, 4}, filled(4)));
        Random random = new Random(3);
        List<In> good = bertRequest(random, 1, 3, 0);
        List<In> good2 = bertRequest(random, 1, 4, 1);
        long[] before = served.counts(Zoo.BERT);
        List<Future<Object>> answers = new ArrayList<>();
        for (List<In> r : List.of(outOfVocabulary, mismatched, good, good2)) {
            answers.add(pool.submit(() -> {
                try {
                    return served.rest(Zoo.BERT, r);
                } catch (IllegalStateException e) {
                    return e.getMessage();
                }
            }));
        }
        Object[] got = new Object[4];
        for (int i = 0; i < 4; i++) {
            got[i] = answers.get(i).get(120, TimeUnit.SECONDS);
        }
        assertTrue(got[0] instanceof String m && m.contains("ONNX Runtime"), String.valueOf(got[0]));
        assertTrue(got[1] instanceof String m && m.contains("ONNX Runtime"), String.valueOf(got[1]));
        assertClose(ort(env, bert, good), cast(got[2]), "good request 1 of the batch");
        assertClose(ort(env, bert, good2), cast(got[3]), "good request 2 of the batch");
        assertEquals(1, served.counts(Zoo.BERT)[1] - before[1], "the four requests should have run as one batch");
        // a shape the model cannot take is refused by the host before it queues (ResNet's image is fixed)
        List<In> wrongShape = List.of(new In("input", "FP32", new long[] {1, 3, 8, 8}, new float[3 * 64]));
        IllegalStateException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> served.rest(Zoo.RESNET, wrongShape));
        assertTrue(e.getMessage().contains("400") && e.getMessage().contains("[1, 3, 8, 8]"), e.getMessage());
    }

    @SuppressWarnings("unchecked")
    private static Map<String, float[]> cast(Object answer) {
        if (answer instanceof String s) {
            throw new AssertionError("a good request failed: " + s);
        }
        return (Map<String, float[]>) answer;
    }
}
