package io.backplane.backend.fil;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.BackendConformanceTest;
import io.backplane.testkit.Capability;
import io.backplane.testkit.ConformanceModel;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Set;
import ml.dmlc.xgboost4j.java.Booster;
import ml.dmlc.xgboost4j.java.XGBoostError;

/**
 * The fil backend passes the conformance kit with an XGBoost binary classifier trained here
 * (xgboost_json, predict_proba): each request carries its own row, and its answer must be
 * xgboost4j's own [1-p, p] for that row. The failing request sends a row of one feature too many
 * (input__0 declares dims [-1], so only the backend can tell). It runs in integration-test on the
 * packaged plugin directory target/plugin/fil/ (system property backplane.plugin.directory, set by
 * failsafe), loaded as the server loads it: its own class loader, xgboost4j and lightgbm4j from lib/.
 */
class FilConformanceTest extends BackendConformanceTest {
    private static Booster booster;
    private static byte[] json;

    private static synchronized Booster booster() {
        if (booster == null) {
            try {
                booster = TreeModels.train(true);
                json = booster.toByteArray("json");
            } catch (XGBoostError e) {
                throw new IllegalStateException(e);
            }
        }
        return booster;
    }

    static ModelConfig config() {
        return ModelConfig.builder("trees").backend(FilBackendFactory.NAME).maxBatchSize(8)
                .parameter("model_type", "xgboost_json").parameter("output_class", "true").parameter("predict_proba", "true")
                .input(TensorConfig.of("input__0", DataType.FP32, -1)).output(TensorConfig.of("output__0", DataType.FP32, 2)).build();
    }

    static InferenceRequest request(long tag) {
        return InferenceRequest.builder("trees").input(Tensor.ofFloats("input__0", new long[] {1, TreeModels.FEATURES}, TreeModels.rows(tag, 1)))
                .build();
    }

    @Override
    protected BackendFactory backend() {
        return new FilBackendFactory();
    }

    @Override
    protected ConformanceModel model() {
        booster();
        return ConformanceModel.builder(config())
                .versionFile("xgboost.json", json)
                .request(FilConformanceTest::request)
                .check((request, responses) -> {
                    float[] row = request.input("input__0").toFloatArray();
                    float p = TreeModels.predict(booster(), row)[0];
                    float[] got = responses.getFirst().output("output__0").toFloatArray();
                    assertArrayEquals(new float[] {1f - p, p}, got, () -> "row " + Arrays.toString(row));
                })
                .failingRequest(tag -> InferenceRequest.builder("trees")
                        .input(Tensor.ofFloats("input__0", new long[] {1, TreeModels.FEATURES + 1}, new float[TreeModels.FEATURES + 1])).build())
                .build();
    }

    @Override
    protected Set<Capability> capabilities() {
        return EnumSet.of(Capability.BATCHING, Capability.CANCELLATION);
    }
}
