package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.dist.ServeTorchScriptTest.Saved;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import ml.dmlc.xgboost4j.java.Booster;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36's "done when": one Triton model repository holding a TorchScript model
 * ({@code platform: "pytorch_libtorch"}), an XGBoost and a LightGBM model ({@code backend: "fil"}),
 * each with the config Triton's backends read, loads unchanged in {@code backplane serve}, and each
 * model answers over REST and gRPC what its library answers called directly. The models are made
 * here: traced with the model environment's torch, trained with xgboost4j and with LightGBM's Python
 * package (the test skips, naming {@code tools/model-env.sh}, where the environment lacks them).
 */
@Timeout(600)
class ServeTritonRepositoryTest {
    @TempDir
    Path dir;

    @Test
    void torchScriptXgboostAndLightgbm_inOneTritonRepository_loadUnchanged_andAnswerAsTheirLibraries() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(ServeProcess.DIST.resolve("backends/pytorch")) && Files.isDirectory(ServeProcess.DIST.resolve("backends/fil")),
                "the layout lacks backends/pytorch or backends/fil");
        Path made = ServeTorchScriptTest.makeModels(dir);
        Path lgb = ServeFilTest.trainLightgbm(dir.resolve("lightgbm"));
        Assumptions.assumeTrue(lgb != null, "the model environment has no lightgbm: run tools/model-env.sh");
        Path repo = Files.createDirectories(dir.resolve("repo"));
        ServeTorchScriptTest.model(repo, made, "tiny_conv", """
                platform: "pytorch_libtorch"
                max_batch_size: 8
                input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]
                output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 5 ] } ]
                dynamic_batching { }
                """);
        Booster xgb = ServeFilTest.train();
        try {
            ServeFilTest.write(repo, "trees_xgb", ServeFilTest.config("xgboost_json", 2, true, "dynamic_batching { }"), "xgboost.json",
                    xgb.toByteArray("json"));
            ServeFilTest.write(repo, "trees_lgb", ServeFilTest.config("lightgbm", 1, false, ""), "model.txt",
                    Files.readAllBytes(lgb.resolve("lgb_regression/model.txt")));
            Map<String, Saved> conv = ServeTorchScriptTest.tensors(made, "tiny_conv");
            float[] lgbRows = ServeFilTest.readFloats(lgb.resolve("rows.f32"));
            double[] lgbExpected = ServeFilTest.readDoubles(lgb.resolve("lgb_regression/expected.f64"));
            try (ServeProcess s = ServeProcess.in(dir, "serve").repository(repo).frontends("http", "grpc")
                    .loadModels("tiny_conv", "trees_xgb", "trees_lgb").args("--exit-timeout-secs", "3").env("JAVA_OPTS", "-Xmx512m").start()) {
                s.awaitStarted(Duration.ofSeconds(240));
                try (HttpClient http = HttpClient.newHttpClient()) {
                    String base = "http://127.0.0.1:" + s.port("http") + "/v2/models/";
                    for (String model : new String[] {"tiny_conv", "trees_xgb", "trees_lgb"}) {
                        HttpResponse<String> ready = http.send(HttpRequest.newBuilder(URI.create(base + model + "/ready")).GET().build(),
                                HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
                        assertEquals(200, ready.statusCode(), model + " is not ready:\n" + s.output());
                    }
                    JsonNode torch = ServeTorchScriptTest.rest(http, base + "tiny_conv/infer", "INPUT__0", conv.get("in_0"));
                    ServeTorchScriptTest.assertOutput(torch, "OUTPUT__0", conv.get("out_0"), s);
                }
                float[] rest = ServeFilTest.rows(17, 4, false);
                float[] grpcRows = ServeFilTest.rows(18, 4, true);
                assertArrayEquals(ServeFilTest.proba(ServeFilTest.predict(xgb, rest)), ServeFilTest.restInfer(s, "trees_xgb", rest), "REST trees_xgb");
                assertArrayEquals(ServeFilTest.proba(ServeFilTest.predict(xgb, grpcRows)), ServeFilTest.grpcInfer(s, "trees_xgb", grpcRows),
                        "gRPC trees_xgb");
                ServeFilTest.assertClose(lgbExpected, ServeFilTest.grpcInfer(s, "trees_lgb", lgbRows), "gRPC trees_lgb");
                ServeFilTest.assertClose(ServeFilTest.expectedOfComplete(lgbRows, lgbExpected),
                        ServeFilTest.restInfer(s, "trees_lgb", ServeFilTest.firstCompleteRows(lgbRows, lgbExpected)), "REST trees_lgb");
                ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", s.port("grpc"), InsecureChannelCredentials.create()).build();
                try {
                    var grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS);
                    ServeTorchScriptTest.assertOutput(grpc.modelInfer(ServeTorchScriptTest.grpcRequest("tiny_conv", "INPUT__0", conv.get("in_0"))),
                            "OUTPUT__0", conv.get("out_0"));
                } finally {
                    channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
                }
                s.signal("TERM", false);
                assertEquals(0, s.awaitExit(), s.output());
                assertTrue(s.output().contains("backend 'pytorch'") && s.output().contains("backend 'fil'"), s.output());
            }
        } finally {
            xgb.dispose();
        }
    }
}
