package io.backplane.backend.fil;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import ml.dmlc.xgboost4j.java.Booster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A fil model that cannot serve fails its load with the bad value and what to do: an unknown
 * model_type, a missing model file, a feature count or output width the model does not have, a
 * file of another format. Also: loading natives leaves no file in the temporary folder.
 */
class FilLoadErrorsTest {
    @TempDir
    static Path repo;
    private static BackplaneHost host;
    private static byte[] json;

    @BeforeAll
    static void start() throws Exception {
        Booster b = TreeModels.train(true);
        try {
            json = b.toByteArray("json");
        } finally {
            b.dispose();
        }
        host = BackplaneHost.builder().modelRepository(repo).backend(new FilBackendFactory()).modelControlMode(ModelControlMode.EXPLICIT)
                .callerRuns(false).build();
    }

    @AfterAll
    static void stop() {
        if (host != null) {
            host.close();
        }
    }

    private static BackplaneException loadFails(String name, String config, String file, byte[] model) throws Exception {
        FilRepository.write(repo, name, config, file, model);
        return assertThrows(BackplaneException.class, () -> host.load(name));
    }

    @Test
    void unknownModelType_namesItAndTheKnownOnes() throws Exception {
        BackplaneException e = loadFails("bad_type", FilRepository.config("catboost", 8, 2, true, true, "", ""), "xgboost.json", json);
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'catboost'") && e.getMessage().contains("xgboost_json") && e.getMessage().contains("lightgbm"),
                e.getMessage());
    }

    @Test
    void missingModelFile_namesThePath() throws Exception {
        BackplaneException e = loadFails("no_file", FilRepository.config("xgboost_ubj", 8, 2, true, true, "", ""), "xgboost.json", json);
        assertTrue(e.getMessage().contains("xgboost.ubj") && e.getMessage().contains("does not exist"), e.getMessage());
    }

    @Test
    void featureCountOfTheConfig_notTheModels_namesBoth() throws Exception {
        BackplaneException e = loadFails("bad_features", FilRepository.config("xgboost_json", 5, 2, true, true, "", ""), "xgboost.json", json);
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("declares 5 features") && e.getMessage().contains("dims: [ 8 ]"), e.getMessage());
    }

    @Test
    void outputWidthOfTheConfig_notTheModels_namesBoth() throws Exception {
        BackplaneException e = loadFails("bad_width", FilRepository.config("xgboost_json", 8, 3, true, true, "", ""), "xgboost.json", json);
        assertTrue(e.getMessage().contains("[3]") && e.getMessage().contains("dims: [ 2 ]"), e.getMessage());
    }

    @Test
    void fileOfAnotherFormat_isRefusedByTheLibrary_namingTheFile() throws Exception {
        BackplaneException e = loadFails("not_lightgbm", FilRepository.config("lightgbm", 8, 2, true, true, "", ""), "model.txt", json);
        assertTrue(e.getMessage().contains("model.txt"), e.getMessage());
    }

    @Test
    void xgboostFileOfAnotherFormatThanModelType_namesTheFormatToSet() throws Exception {
        BackplaneException e = loadFails("json_as_ubj", FilRepository.config("xgboost_ubj", 8, 2, true, true, "", ""), "xgboost.ubj", json);
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("JSON") && e.getMessage().contains("set model_type to 'xgboost_json'"), e.getMessage());
    }

    @Test
    void badThreadCount_namesIt() throws Exception {
        BackplaneException e = loadFails("bad_threads", FilRepository.config("xgboost_json", 8, 2, true, true,
                ",\n  { key: \"cpu_nthread\" value: { string_value: \"many\" } }", ""), "xgboost.json", json);
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("cpu_nthread is 'many'"), e.getMessage());
    }

    @Test
    void badParameterValue_namesIt() throws Exception {
        BackplaneException e = loadFails("bad_bool", FilRepository.config("xgboost_json", 8, 2, true, true, "", "").replace(
                "string_value: \"true\" } },\n  { key: \"predict_proba\"", "string_value: \"yes\" } },\n  { key: \"predict_proba\""), "xgboost.json", json);
        assertTrue(e.getMessage().contains("output_class is 'yes'"), e.getMessage());
    }

    /** Pain point 1 of issue 36: xgboost4j and lightgbm4j unpack native libraries into the temporary folder; none stays there. */
    @Test
    void nativeLibraries_leaveNoFileInTheTemporaryFolder() throws Exception {
        NativeLibraries.xgboost();
        NativeLibraries.lightgbm();
        Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
        try (Stream<Path> files = Files.exists(tmp) ? Files.list(tmp) : Stream.empty()) {
            assertEquals(java.util.List.of(), files.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith("libxgboost4j") || n.startsWith("lib_lightgbm") || n.startsWith("backplane-fil-")).toList());
        }
    }
}
