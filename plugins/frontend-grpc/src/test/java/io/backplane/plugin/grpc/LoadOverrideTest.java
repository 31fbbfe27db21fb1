package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelRepositoryParameter;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.protocol.inference.RepositoryModelUnloadRequest;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Triton's repository extension with overrides, through both real frontends of one host: a load
 * with {@code config} (JSON) and {@code file:<path>} parameters, the private folder the files go
 * to and its removal, and refusals that name the bad value.
 */
class LoadOverrideTest {
    static final String CONFIG = """
            {"name": "%s", "backend": "testing",
             "input": [{"name": "IN0", "data_type": "TYPE_FP32", "dims": [-1]}],
             "output": [{"name": "%s", "data_type": "TYPE_FP32", "dims": ["-1"]}]}""";

    @TempDir
    Path repo;
    final TestBackend backend = new TestBackend();
    BackplaneHost host;
    GrpcFrontend grpc;
    Frontend http;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub client;
    HttpClient rest;
    String base;

    @BeforeEach
    void start() throws Exception {
        Path m = Files.createDirectories(repo.resolve("m").resolve("1"));
        Files.writeString(m.getParent().resolve("config.pbtxt"), """
                backend: "testing"
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                """);
        Files.writeString(m.resolve("weights.bin"), "repository file");
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .unloadTimeout(Duration.ofSeconds(5)).build();
        grpc = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        grpc.start();
        http = new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        http.start();
        base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpc.port(), InsecureChannelCredentials.create()).build();
        client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
        rest = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterEach
    void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        rest.close();
        grpc.close();
        http.close();
        host.close();
        assertEquals(List.of(), loadRoots(), "the host removes its load folder when it closes");
        TestSupport.assertNoBackplaneThreads();
    }

    /** This JVM's private load folders (other processes' are never looked at). */
    static List<Path> loadRoots() throws IOException {
        String prefix = "backplane-load-" + ProcessHandle.current().pid() + "-";
        try (Stream<Path> s = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
            return s.filter(p -> p.getFileName().toString().startsWith(prefix)).toList();
        }
    }

    /** Every model folder in the load folders. */
    static List<Path> modelFolders() throws IOException {
        List<Path> out = new java.util.ArrayList<>();
        for (Path root : loadRoots()) {
            try (Stream<Path> s = Files.list(root)) {
                s.forEach(out::add);
            }
        }
        return out;
    }

    static ModelRepositoryParameter text(String s) {
        return ModelRepositoryParameter.newBuilder().setStringParam(s).build();
    }

    static ModelRepositoryParameter bytes(String s) {
        return ModelRepositoryParameter.newBuilder().setBytesParam(ByteString.copyFromUtf8(s)).build();
    }

    String outputName(String model) {
        ModelInferResponse r = client.modelInfer(GrpcFrontendTest.fp32(model, 1f, 2f));
        assertArrayEquals(new float[] {1f, 2f}, GrpcFrontendTest.floats(r.getRawOutputContents(0)));
        return r.getOutputs(0).getName();
    }

    HttpResponse<String> post(String path, String body) throws Exception {
        return rest.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void loadWithFiles_grpcThenRest_privateFolderReplacedAndRemovedOnUnload() throws Exception {
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("ov")
                .putParameters("config", text(CONFIG.formatted("ov", "OUT0"))).putParameters("file:1/weights.bin", bytes("grpc weights"))
                .build());
        assertEquals("OUT0", outputName("ov"));
        List<Path> first = modelFolders();
        assertEquals(1, first.size(), first.toString());
        assertEquals("grpc weights", Files.readString(first.get(0).resolve("ov/1/weights.bin")));
        assertTrue(Files.readString(first.get(0).resolve("ov/config.pbtxt")).contains("testing"));
        assertFalse(Files.exists(repo.resolve("ov")), "nothing is written into the repository");

        // Reloaded over REST with base64 files: the new folder serves, the old one is gone.
        String body = "{\"parameters\":{\"config\":" + new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(CONFIG.formatted("ov", "OUTX"))
                + ",\"file:1/weights.bin\":\"" + Base64.getEncoder().encodeToString("rest weights".getBytes(StandardCharsets.UTF_8)) + "\""
                + ",\"file:1/sub/more.txt\":\"" + Base64.getEncoder().encodeToString(new byte[] {1, 2, 3}) + "\"}}";
        HttpResponse<String> r = post("/v2/repository/models/ov/load", body);
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("OUTX", outputName("ov"));
        List<Path> second = modelFolders();
        assertEquals(1, second.size(), second.toString());
        assertFalse(second.equals(first));
        assertEquals("rest weights", Files.readString(second.get(0).resolve("ov/1/weights.bin")));
        assertArrayEquals(new byte[] {1, 2, 3}, Files.readAllBytes(second.get(0).resolve("ov/1/sub/more.txt")));

        client.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("ov").build());
        assertEquals(List.of(), modelFolders(), "unload removes the files");

        // Loaded again and left loaded: the host removes it when it closes (checked after each test).
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("ov")
                .putParameters("config", text(CONFIG.formatted("ov", "OUT0"))).putParameters("file:1/weights.bin", bytes("again")).build());
        assertEquals(1, modelFolders().size());
    }

    /** Triton's clients and QA tests name files from the model folder's root ({@code file:/1/model.py}); the files stay inside it. */
    @Test
    void loadWithFiles_leadingSlashNamesTheModelFolderRoot_grpcAndRest() throws Exception {
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("ov")
                .putParameters("config", text(CONFIG.formatted("ov", "OUT0"))).putParameters("file:/1/weights.bin", bytes("grpc weights"))
                .build());
        assertEquals("OUT0", outputName("ov"));
        List<Path> first = modelFolders();
        assertEquals(1, first.size(), first.toString());
        assertEquals("grpc weights", Files.readString(first.get(0).resolve("ov/1/weights.bin")));

        String body = "{\"parameters\":{\"config\":" + new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(CONFIG.formatted("ov", "OUTX"))
                + ",\"file:/1/weights.bin\":\"" + Base64.getEncoder().encodeToString("rest weights".getBytes(StandardCharsets.UTF_8)) + "\""
                + ",\"file:/1/sub/more.txt\":\"" + Base64.getEncoder().encodeToString(new byte[] {1, 2, 3}) + "\"}}";
        HttpResponse<String> r = post("/v2/repository/models/ov/load", body);
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("OUTX", outputName("ov"));
        List<Path> second = modelFolders();
        assertEquals(1, second.size(), second.toString());
        assertEquals("rest weights", Files.readString(second.get(0).resolve("ov/1/weights.bin")));
        assertArrayEquals(new byte[] {1, 2, 3}, Files.readAllBytes(second.get(0).resolve("ov/1/sub/more.txt")));

        // One file named twice, with and without the slash, is refused naming both.
        StatusRuntimeException twice = assertThrows(StatusRuntimeException.class, () -> client.repositoryModelLoad(
                RepositoryModelLoadRequest.newBuilder().setModelName("ov").putParameters("config", text(CONFIG.formatted("ov", "OUT0")))
                        .putParameters("file:/1/weights.bin", bytes("a")).putParameters("file:1/weights.bin", bytes("b")).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, twice.getStatus().getCode());
        assertTrue(twice.getStatus().getDescription().contains("'file:/1/weights.bin'")
                && twice.getStatus().getDescription().contains("'file:1/weights.bin'"), twice.getStatus().toString());
        assertEquals("OUTX", outputName("ov"), "a refused load keeps the loaded version serving");

        client.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("ov").build());
        assertEquals(List.of(), modelFolders(), "unload removes the files");
    }

    @Test
    void loadWithConfigOnly_appliesToTheRepositoryFiles_thenPlainLoadRestoresTheRepositoryConfig() throws Exception {
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m").build());
        assertEquals("OUT0", outputName("m"));
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m")
                .putParameters("config", text(CONFIG.formatted("m", "RENAMED"))).build());
        assertEquals("RENAMED", outputName("m"));
        assertEquals(List.of(), modelFolders(), "a config alone writes no files");
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m").build());
        assertEquals("OUT0", outputName("m"));
    }

    /**
     * A config override that changes only the instance count changes the instances in place over
     * gRPC as over REST: no new backend model; the statistics show the count. Another change reloads.
     */
    @Test
    void loadWithConfigOnly_countsOnly_changesInstancesInPlace() throws Exception {
        String counted = CONFIG.formatted("m", "OUT0").replaceFirst("}$", ", \"instance_group\": [{\"count\": %d, \"kind\": \"KIND_CPU\"}]}");
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m")
                .putParameters("config", text(counted.formatted(1))).build());
        int loads = backend.modelsLoaded.get();
        for (int count : new int[] {3, 1}) {
            client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m")
                    .putParameters("config", text(counted.formatted(count))).build());
            assertEquals(loads, backend.modelsLoaded.get(), "no new backend model: the instances changed in place");
            assertEquals(count, host.statistics("m", 1).getFirst().instances());
            assertEquals(count, host.modelConfig("m", 1).instanceGroups().getFirst().count());
        }
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m")
                .putParameters("config", text(CONFIG.formatted("m", "RENAMED").replaceFirst("}$", ", \"instance_group\": [{\"count\": 2}]}"))).build());
        assertEquals(loads + 1, backend.modelsLoaded.get(), "another difference reloads");
        assertEquals("RENAMED", outputName("m"));
    }

    @Test
    void loadWithBadParameters_refusedNamingTheValue_nothingWritten() throws Exception {
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("m").build());
        String config = CONFIG.formatted("ov", "OUT0");
        for (String bad : List.of("file:../escape", "file:/../escape", "file://etc/passwd", "file:/", "file:1/../../escape", "file:1//x",
                "file:", "file:1\\x", "file:/1\\x", "file:config.pbtxt", "file:/config.pbtxt")) {
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.repositoryModelLoad(
                    RepositoryModelLoadRequest.newBuilder().setModelName("ov").putParameters("config", text(config))
                            .putParameters(bad, bytes("x")).build()));
            assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), bad);
            assertTrue(e.getStatus().getDescription().contains("'" + bad + "'"), e.getStatus().toString());
        }
        StatusRuntimeException noConfig = assertThrows(StatusRuntimeException.class, () -> client.repositoryModelLoad(
                RepositoryModelLoadRequest.newBuilder().setModelName("ov").putParameters("file:1/a", bytes("x")).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, noConfig.getStatus().getCode());
        assertTrue(noConfig.getStatus().getDescription().contains("'config'"), noConfig.getStatus().toString());
        StatusRuntimeException notJson = assertThrows(StatusRuntimeException.class, () -> client.repositoryModelLoad(
                RepositoryModelLoadRequest.newBuilder().setModelName("m").putParameters("config", text("{\"nmae\": 1}")).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, notJson.getStatus().getCode());
        assertTrue(notJson.getStatus().getDescription().contains("nmae"), notJson.getStatus().toString());
        StatusRuntimeException unknown = assertThrows(StatusRuntimeException.class, () -> client.repositoryModelLoad(
                RepositoryModelLoadRequest.newBuilder().setModelName("m").putParameters("colour", text("red")).build()));
        assertTrue(unknown.getStatus().getDescription().contains("'colour'"), unknown.getStatus().toString());
        StatusRuntimeException wrongName = assertThrows(StatusRuntimeException.class, () -> client.repositoryModelLoad(
                RepositoryModelLoadRequest.newBuilder().setModelName("m").putParameters("config", text(CONFIG.formatted("other", "OUT0"))).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, wrongName.getStatus().getCode());
        assertTrue(wrongName.getStatus().getDescription().contains("other"), wrongName.getStatus().toString());

        HttpResponse<String> notBase64 = post("/v2/repository/models/ov/load", "{\"parameters\":{\"config\":\"{}\",\"file:1/a\":\"%%%\"}}");
        assertEquals(400, notBase64.statusCode(), notBase64.body());
        assertTrue(notBase64.body().contains("file:1/a"), notBase64.body());
        HttpResponse<String> configObject = post("/v2/repository/models/m/load", "{\"parameters\":{\"config\":{\"name\":\"m\"}}}");
        assertEquals(400, configObject.statusCode(), configObject.body());
        assertTrue(configObject.body().contains("'config'"), configObject.body());

        assertEquals(List.of(), modelFolders(), "no refused load leaves files behind");
        try (Stream<Path> s = Files.list(repo)) {
            assertEquals(List.of("m"), s.map(p -> p.getFileName().toString()).toList(), "nothing is written into the repository");
        }
        assertEquals("OUT0", outputName("m"), "the model loaded before keeps serving its repository config");
    }

    @Test
    void loadWithPartialConfig_noBackend_completedFromTheModelFile() throws Exception {
        // Triton's simple_grpc_model_control: load_model("simple", config='{"max_batch_size":"16"}') on a loaded model.
        Path simple = Files.createDirectories(repo.resolve("simple").resolve("1"));
        Files.writeString(simple.getParent().resolve("config.pbtxt"), """
                backend: "testing"
                max_batch_size: 8
                input [{ name: "IN0" data_type: TYPE_FP32 dims: [-1] }]
                output [{ name: "OUT0" data_type: TYPE_FP32 dims: [-1] }]
                """);
        Files.writeString(simple.resolve("model.testing"), "weights");
        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("simple").build());
        String partial = """
                {"max_batch_size": "16", "input": [{"name": "IN0", "data_type": "TYPE_FP32", "dims": [-1]}],
                 "output": [{"name": "OUT0", "data_type": "TYPE_FP32", "dims": [-1]}]}""";

        client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("simple").putParameters("config", text(partial)).build());

        var config = client.modelConfig(io.backplane.protocol.inference.ModelConfigRequest.newBuilder().setName("simple").build()).getConfig();
        assertEquals(16, config.getMaxBatchSize());
        assertEquals("testing", config.getBackend());
        assertEquals(List.of(), modelFolders(), "a config alone writes no files");
    }
}
