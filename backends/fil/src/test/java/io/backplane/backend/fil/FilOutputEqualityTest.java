package io.backplane.backend.fil;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ModelStatistics;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import ml.dmlc.xgboost4j.java.Booster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Served outputs equal each library's own predictions on the same rows (NaN = missing included):
 * XGBoost models trained here with xgboost4j, saved as JSON, UBJSON and (where 3.4 still writes
 * it) the legacy binary, compared exactly with xgboost4j's {@code predict}; LightGBM models trained
 * by LightGBM's Python package, compared with its {@code Booster.predict} within 1e-6 (relative to
 * values above 1: output__0 is FP32, LightGBM predicts in double). Also: several requests batched
 * into one prediction and split back, many concurrent clients over two instances, and bad requests.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class FilOutputEqualityTest {
    @TempDir
    static Path repo;
    private static BackplaneHost host;
    private static Booster classifier;
    private static Booster regressor;
    private static boolean legacyWritten;
    private static final List<String> LOADED = new ArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        classifier = TreeModels.train(true);
        regressor = TreeModels.train(false);
        int f = TreeModels.FEATURES;
        write("xgb_proba", FilRepository.config("xgboost_json", f, 2, true, true, "", ""), "xgboost.json", classifier.toByteArray("json"));
        write("xgb_class", FilRepository.config("xgboost_ubj", f, 1, true, false, ",\n  { key: \"threshold\" value: { string_value: \"0.3\" } }", ""),
                "xgboost.ubj", classifier.toByteArray("ubj"));
        write("xgb_regression", FilRepository.config("xgboost_ubj", f, 1, false, false, "", ""), "xgboost.ubj", regressor.toByteArray("ubj"));
        write("xgb_one_thread", FilRepository.config("xgboost_ubj", f, 1, false, false, ",\n  { key: \"cpu_nthread\" value: { string_value: \"1\" } }",
                ""), "xgboost.ubj", regressor.toByteArray("ubj"));
        try {
            byte[] legacy = regressor.toByteArray("deprecated");
            write("xgb_legacy", FilRepository.config("xgboost", f, 1, false, false, "", ""), "xgboost.model", legacy);
            legacyWritten = true;
        } catch (Exception e) {
            legacyWritten = false; // XGBoost 3.x may no longer write it; the test says so
        }
        // one instance, a preferred batch of 32 rows and a long delay: 16 requests of 2 rows leave as one batch, at once when all are queued
        write("xgb_batched", FilRepository.config("xgboost_json", f, 2, true, true, "",
                "dynamic_batching { preferred_batch_size: [ 32 ] max_queue_delay_microseconds: 60000000 }").replace("count: 2", "count: 1"),
                "xgboost.json", classifier.toByteArray("json"));
        write("xgb_busy", FilRepository.config("xgboost_json", f, 2, true, true, "",
                "dynamic_batching { max_queue_delay_microseconds: 500 }").replace("count: 2", "count: 3"), "xgboost.json", classifier.toByteArray("json"));
        try {
            Path lgb = LightgbmModels.trained();
            byte[] b = Files.readAllBytes(lgb.resolve("lgb_binary/model.txt"));
            write("lgb_binary", FilRepository.config("lightgbm", f, 2, true, true, "", ""), "model.txt", b);
            write("lgb_binary_class", FilRepository.config("lightgbm", f, 1, true, false, "", ""), "model.txt", b);
            write("lgb_regression", FilRepository.config("lightgbm", f, 1, false, false, "", ""), "model.txt",
                    Files.readAllBytes(lgb.resolve("lgb_regression/model.txt")));
            write("lgb_multiclass", FilRepository.config("lightgbm", f, 3, true, true, "", ""), "model.txt",
                    Files.readAllBytes(lgb.resolve("lgb_multiclass/model.txt")));
            write("lgb_multiclass_class", FilRepository.config("lightgbm", f, 1, true, false, "", ""), "model.txt",
                    Files.readAllBytes(lgb.resolve("lgb_multiclass/model.txt")));
        } catch (org.opentest4j.TestAbortedException e) {
            // the LightGBM tests skip with the same message
        }
        BackplaneHost.Builder b = BackplaneHost.builder().modelRepository(repo).backend(new FilBackendFactory())
                .modelControlMode(ModelControlMode.EXPLICIT).callerRuns(false);
        LOADED.forEach(b::loadModel);
        host = b.build();
    }

    private static void write(String name, String config, String file, byte[] model) throws Exception {
        FilRepository.write(repo, name, config, file, model);
        LOADED.add(name);
    }

    @AfterAll
    static void stop() {
        if (host != null) {
            host.close();
        }
        if (classifier != null) {
            classifier.dispose();
            regressor.dispose();
        }
    }

    static float[] serve(String model, float[] rows) throws Exception {
        InferenceResponse r = host.infer(request(model, rows)).get(60, TimeUnit.SECONDS);
        return r.output("output__0").toFloatArray();
    }

    static InferenceRequest request(String model, float[] rows) {
        return InferenceRequest.builder(model)
                .input(Tensor.ofFloats("input__0", new long[] {rows.length / TreeModels.FEATURES, TreeModels.FEATURES}, rows)).build();
    }

    @Test
    void xgboostJson_predictProba_equalsXgboost4j() throws Exception {
        float[] rows = TreeModels.rows(1001, 50);
        float[] p = TreeModels.predict(classifier, rows);
        float[] expected = new float[100];
        for (int i = 0; i < 50; i++) {
            expected[2 * i] = 1f - p[i];
            expected[2 * i + 1] = p[i];
        }
        assertArrayEquals(expected, serve("xgb_proba", rows));
    }

    @Test
    void xgboostUbj_classWithThreshold_equalsXgboost4jAboveThreshold() throws Exception {
        float[] rows = TreeModels.rows(1002, 50);
        float[] p = TreeModels.predict(classifier, rows);
        float[] expected = new float[50];
        for (int i = 0; i < 50; i++) {
            expected[i] = p[i] > 0.3f ? 1f : 0f;
        }
        assertArrayEquals(expected, serve("xgb_class", rows));
    }

    @Test
    void xgboostUbj_regressor_equalsXgboost4j() throws Exception {
        float[] rows = TreeModels.rows(1003, 50);
        assertArrayEquals(TreeModels.predict(regressor, rows), serve("xgb_regression", rows));
    }

    @Test
    void cpuNthread_changesNoOutput() throws Exception {
        float[] rows = TreeModels.rows(1004, 50);
        assertArrayEquals(TreeModels.predict(regressor, rows), serve("xgb_one_thread", rows));
    }

    @Test
    void xgboostLegacyBinary_regressor_equalsXgboost4j() throws Exception {
        Assumptions.assumeTrue(legacyWritten, "xgboost4j 3.4 no longer writes the legacy binary format (toByteArray(\"deprecated\") failed)");
        float[] rows = TreeModels.rows(1004, 50);
        assertArrayEquals(TreeModels.predict(regressor, rows), serve("xgb_legacy", rows));
    }

    @Test
    void lightgbm_binaryProba_equalsPythonPredict() throws Exception {
        double[] p = LightgbmModels.expected("lgb_binary");
        double[] expected = new double[p.length * 2];
        for (int i = 0; i < p.length; i++) {
            expected[2 * i] = 1 - p[i];
            expected[2 * i + 1] = p[i];
        }
        assertClose(expected, serve("lgb_binary", LightgbmModels.rows()));
    }

    @Test
    void lightgbm_binaryClass_isPythonPredictAboveOneHalf() throws Exception {
        double[] p = LightgbmModels.expected("lgb_binary");
        double[] expected = Arrays.stream(p).map(v -> (float) v > 0.5f ? 1 : 0).toArray();
        assertClose(expected, serve("lgb_binary_class", LightgbmModels.rows()));
    }

    @Test
    void lightgbm_regressor_equalsPythonPredict() throws Exception {
        assertClose(LightgbmModels.expected("lgb_regression"), serve("lgb_regression", LightgbmModels.rows()));
    }

    @Test
    void lightgbm_multiclass_equalsPythonPredict_andItsArgmax() throws Exception {
        double[] p = LightgbmModels.expected("lgb_multiclass");
        float[] rows = LightgbmModels.rows();
        assertClose(p, serve("lgb_multiclass", rows));
        double[] argmax = new double[p.length / 3];
        for (int i = 0; i < argmax.length; i++) {
            int best = 0;
            for (int c = 1; c < 3; c++) {
                if ((float) p[i * 3 + c] > (float) p[i * 3 + best]) {
                    best = c;
                }
            }
            argmax[i] = best;
        }
        assertClose(argmax, serve("lgb_multiclass_class", rows));
    }

    /**
     * Sixteen requests of two rows, queued together (preferred batch 32 rows, a minute's delay):
     * one prediction for all of them, and each request gets its own two rows' answer.
     */
    @Test
    void dynamicBatching_stacksRequestsIntoOnePrediction_andSplitsThemBack() throws Exception {
        ModelStatistics before = host.statistics("xgb_batched", 1).getFirst();
        List<CompletableFuture<InferenceResponse>> answers = new ArrayList<>();
        List<float[]> sent = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            float[] rows = TreeModels.rows(2000 + i, 2);
            sent.add(rows);
            answers.add(host.infer(request("xgb_batched", rows)));
        }
        for (int i = 0; i < 16; i++) {
            float[] p = TreeModels.predict(classifier, sent.get(i));
            assertArrayEquals(new float[] {1f - p[0], p[0], 1f - p[1], p[1]},
                    answers.get(i).get(60, TimeUnit.SECONDS).output("output__0").toFloatArray(), "request " + i);
        }
        ModelStatistics after = host.statistics("xgb_batched", 1).getFirst();
        assertEquals(32, after.inferenceCount() - before.inferenceCount(), "inferences (rows, as Triton counts them)");
        assertEquals(1, after.executionCount() - before.executionCount(), "the 16 requests ran as one prediction");
    }

    /** 32 clients, 12 requests each of 1 to 4 rows, over three instances sharing one booster: each gets its own rows' answer. */
    @Test
    void concurrentClients_eachGetTheirOwnRowsAnswer() throws Exception {
        List<Thread> clients = new ArrayList<>();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        java.util.concurrent.CountDownLatch gate = new java.util.concurrent.CountDownLatch(1);
        for (int c = 0; c < 32; c++) {
            int client = c;
            clients.add(Thread.ofPlatform().name("fil-client-" + c).start(() -> {
                try {
                    gate.await();
                    for (int i = 0; i < 12; i++) {
                        float[] rows = TreeModels.rows(10_000L * client + i, 1 + (client + i) % 4);
                        float[] p = TreeModels.predict(classifier, rows);
                        float[] got = serve("xgb_busy", rows);
                        for (int r = 0; r < p.length; r++) {
                            assertEquals(p[r], got[2 * r + 1], "client " + client + " request " + i + " row " + r);
                        }
                    }
                } catch (Throwable t) {
                    failures.add(t);
                }
            }));
        }
        gate.countDown();
        for (Thread t : clients) {
            t.join();
        }
        assertTrue(failures.isEmpty(), () -> failures.size() + " client(s) failed, first: " + failures.getFirst());
    }

    @Test
    void badRequests_areRefused_namingTheValue() {
        ExecutionException wrongWidth = assertThrows(ExecutionException.class,
                () -> host.infer(InferenceRequest.builder("xgb_regression").input(Tensor.ofFloats("input__0", new long[] {1, 7}, new float[7])).build())
                        .get(60, TimeUnit.SECONDS));
        BackplaneException e = assertInstanceOf(BackplaneException.class, wrongWidth.getCause());
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("7"), e.getMessage());
        ExecutionException wrongType = assertThrows(ExecutionException.class,
                () -> host.infer(InferenceRequest.builder("xgb_regression")
                        .input(Tensor.ofDoubles("input__0", new long[] {1, TreeModels.FEATURES}, new double[TreeModels.FEATURES])).build())
                        .get(60, TimeUnit.SECONDS));
        assertEquals(ErrorCode.INVALID_ARGUMENT, assertInstanceOf(BackplaneException.class, wrongType.getCause()).code());
    }

    private static void assertClose(double[] expected, float[] got) {
        assertEquals(expected.length, got.length, "values");
        for (int i = 0; i < expected.length; i++) {
            double tolerance = 1e-6 * Math.max(1, Math.abs(expected[i]));
            assertEquals(expected[i], got[i], tolerance, "value " + i);
        }
    }
}
