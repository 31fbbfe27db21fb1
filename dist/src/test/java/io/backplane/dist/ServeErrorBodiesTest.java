package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelRepositoryParameter;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What error bodies tell a client, through the real server (issue 34): a {@code config.pbtxt} that
 * fails to parse is named by file, line and column, and the line itself (a link to a secret file
 * would carry its content) is in the server log only, in the load answer as in the model's status
 * and config while the last load failed; a {@code model.py} that fails in {@code initialize()}
 * answers with its error and where it was raised, the traceback with its source lines in the server
 * log only; a model named {@code .} with a {@code file:} override is refused with a 400 about the
 * name, over REST and gRPC, and the server keeps serving; a {@code file:/1/model.py} override (the
 * model folder's root, as Triton's tests send it) loads, and a python model's name with a shell
 * character is refused with Triton's "Invalid stub name" sentence. A {@code model.py} that is a link out of
 * the repository is refused with a 400 naming it; links inside it (a ConfigMap's {@code ..data}
 * layout) are served.
 */
@Timeout(300)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ServeErrorBodiesTest {
    private static final Path DIST = ServeProcess.DIST;
    private static final String SECRET = "secret-token-91c2";
    private static final String SOURCE_MARK = "source-line-marker-5e81";
    private static final String IDENTITY_PY = """
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def execute(self, requests):
                    return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                            for r in requests]
            """;

    @TempDir
    static Path dir;
    ServeProcess server;
    int httpPort;
    ManagedChannel channel;

    @BeforeAll
    void serve() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/python")), "the layout has no python backend");
        Process p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).start();
        Assumptions.assumeTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "python3 with numpy is needed");
        Path repo = dir.resolve("repo");
        Files.createDirectories(repo.resolve("badconf/1"));
        Files.writeString(repo.resolve("badconf/1/model.py"), "class TritonPythonModel:\n    pass\n");
        // the second line is what a link to another file would bring: it must never reach a client
        Files.writeString(repo.resolve("badconf/config.pbtxt"), "name: \"badconf\"\n" + SECRET + ":x:0:0:root:/root:/bin/bash\n");
        Files.createDirectories(repo.resolve("initfail/1"));
        Files.writeString(repo.resolve("initfail/config.pbtxt"), """
                name: "initfail"
                backend: "python"
                input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
                output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]
                instance_group [{ count: 1 kind: KIND_CPU }]
                """);
        Files.writeString(repo.resolve("initfail/1/model.py"), """
                class TritonPythonModel:
                    def initialize(self, args):
                        raise RuntimeError("cannot open the weights")  # %s

                    def execute(self, requests):
                        return None
                """.formatted(SOURCE_MARK));
        // links: a model.py that is a link to a file outside the repository, and a ConfigMap-like model whose
        // config.pbtxt and model.py are links into a hidden folder inside it
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Files.writeString(outside.resolve("model.py"), IDENTITY_PY);
        Files.createDirectories(repo.resolve("linkout/1"));
        Files.writeString(repo.resolve("linkout/config.pbtxt"), identityConfig("linkout"));
        Files.createSymbolicLink(repo.resolve("linkout/1/model.py"), outside.resolve("model.py"));
        Path data = Files.createDirectories(repo.resolve("linkin/..2026_12_04_00_00_00.000000001"));
        Files.writeString(data.resolve("config.pbtxt"), identityConfig("linkin"));
        Files.writeString(data.resolve("model.py"), IDENTITY_PY);
        Files.createSymbolicLink(repo.resolve("linkin/..data"), Path.of("..2026_12_04_00_00_00.000000001"));
        Files.createSymbolicLink(repo.resolve("linkin/config.pbtxt"), Path.of("..data/config.pbtxt"));
        Files.createDirectories(repo.resolve("linkin/1"));
        Files.createSymbolicLink(repo.resolve("linkin/1/model.py"), Path.of("../..data/model.py"));
        server = ServeProcess.in(dir, "serve").repository(repo).frontends("http", "grpc").args("--exit-timeout-secs", "3")
                .env("JAVA_OPTS", "-Xmx256m -Djava.io.tmpdir=" + Files.createDirectories(dir.resolve("tmp"))).start();
        server.awaitStarted(Duration.ofSeconds(240));
        httpPort = server.port("http");
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", server.port("grpc"), InsecureChannelCredentials.create()).build();
    }

    @AfterAll
    void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        if (server == null) {
            return;
        }
        try (ServeProcess s = server) {
            s.terminateCleanly();
        }
    }

    @Test
    void configThatFailsToParse_clientReadsFileLineColumn_neverTheLine_logHasIt() throws Exception {
        String load = exchange("POST", "/v2/repository/models/badconf/load", "");
        assertTrue(load.startsWith("HTTP/1.1 400 "), load);
        assertTrue(load.contains("config.pbtxt:2:"), "file, line and column: " + load);
        assertFalse(load.contains(SECRET), "the line's content reached the client: " + load);
        for (String path : List.of("/v2/models/badconf", "/v2/models/badconf/config", "/v2/models/badconf/ready")) {
            String status = exchange("GET", path, null);
            assertFalse(status.contains(SECRET), path + " repeats the line's content: " + status);
        }
        String index = exchange("POST", "/v2/repository/index", "{}");
        assertTrue(index.contains("badconf") && !index.contains(SECRET), index);
        assertTrue(server.output().contains(SECRET), "the server log keeps the line for its operator");
    }

    @Test
    void modelPyThatFailsInInitialize_clientReadsErrorAndPlace_tracebackOnlyInTheLog() throws Exception {
        String load = exchange("POST", "/v2/repository/models/initfail/load", "");
        assertFalse(load.startsWith("HTTP/1.1 200 "), load);
        assertTrue(load.contains("RuntimeError: cannot open the weights (at model.py:3 in initialize)"), load);
        assertFalse(load.contains(SOURCE_MARK) || load.contains("Traceback"), "a source line or traceback reached the client: " + load);
        String status = exchange("GET", "/v2/models/initfail", null);
        assertFalse(status.contains(SOURCE_MARK), status);
        assertTrue(server.output().contains(SOURCE_MARK), "the server log keeps the traceback with its source line");
    }

    @Test
    void modelNamedDot_withFileOverride_refusedAsAName_restAndGrpc_serverServesOn() throws Exception {
        String py = Base64.getEncoder().encodeToString("class TritonPythonModel:\n    pass\n".getBytes(StandardCharsets.UTF_8));
        String body = "{\"parameters\":{\"config\":\"{\\\"backend\\\":\\\"python\\\"}\",\"file:1/model.py\":\"" + py + "\"}}";
        String rest = exchange("POST", "/v2/repository/models/./load", body);
        assertTrue(rest.startsWith("HTTP/1.1 400 "), rest);
        assertTrue(rest.contains("invalid model name '.'"), rest);

        var grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> grpc.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder()
                .setModelName(".").putParameters("config", ModelRepositoryParameter.newBuilder().setStringParam("{\"backend\":\"python\"}").build())
                .putParameters("file:1/model.py", ModelRepositoryParameter.newBuilder()
                        .setBytesParam(ByteString.copyFromUtf8("class TritonPythonModel:\n    pass\n")).build()).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(String.valueOf(e.getStatus().getDescription()).contains("invalid model name '.'"), e.getStatus().toString());

        String live = exchange("GET", "/v2/health/live", null);
        assertTrue(live.startsWith("HTTP/1.1 200 "), live);
    }

    /**
     * Triton's {@code L0_backend_python/model_control} loads with {@code file:/1/model.py} (the
     * model folder's root): valid names load and serve; a name with a shell character reaches the
     * python backend's check and is refused with Triton's sentence, over REST and gRPC.
     */
    @Test
    void fileOverrideWithLeadingSlash_validNamesServe_shellCharactersRefusedAsTritonsStubName_restAndGrpc() throws Exception {
        String py = Base64.getEncoder().encodeToString(IDENTITY_PY.getBytes(StandardCharsets.UTF_8));
        String config = "{\\\"backend\\\":\\\"python\\\",\\\"input\\\":[{\\\"name\\\":\\\"IN\\\",\\\"data_type\\\":\\\"TYPE_FP32\\\",\\\"dims\\\":[1]}],"
                + "\\\"output\\\":[{\\\"name\\\":\\\"OUT\\\",\\\"data_type\\\":\\\"TYPE_FP32\\\",\\\"dims\\\":[1]}]}";
        String body = "{\"parameters\":{\"config\":\"" + config + "\",\"file:/1/model.py\":\"" + py + "\"}}";
        String ok = exchange("POST", "/v2/repository/models/slash-model_1/load", body);
        assertTrue(ok.startsWith("HTTP/1.1 200 "), ok);
        String answer = exchange("POST", "/v2/models/slash-model_1/infer",
                "{\"inputs\":[{\"name\":\"IN\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[4.5]}]}");
        assertTrue(answer.startsWith("HTTP/1.1 200 ") && answer.contains("[4.5]"), answer);
        assertTrue(exchange("POST", "/v2/repository/models/slash-model_1/unload", "{}").startsWith("HTTP/1.1 200 "));

        for (String name : List.of("model;test", "model|test", "model$test", "model\\test", "model'test'", "model*test", "model!test")) {
            String rest = exchange("POST", "/v2/repository/models/" + name + "/load", body);
            assertTrue(rest.startsWith("HTTP/1.1 400 "), name + ": " + rest);
            assertTrue(rest.contains("Invalid stub name: contains invalid characters"), name + ": " + rest);
            String ready = exchange("GET", "/v2/models/" + name + "/ready", null);
            assertFalse(ready.startsWith("HTTP/1.1 200 "), name + ": " + ready);
        }
        var grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS);
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> grpc.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder()
                .setModelName("model&test").putParameters("config", ModelRepositoryParameter.newBuilder().setStringParam("{\"backend\":\"python\"}").build())
                .putParameters("file:/1/model.py", ModelRepositoryParameter.newBuilder()
                        .setBytesParam(ByteString.copyFromUtf8(IDENTITY_PY)).build()).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(String.valueOf(e.getStatus().getDescription()).contains("Invalid stub name: contains invalid characters"), e.getStatus().toString());
    }

    @Test
    void links_outOfTheRepositoryRefusedWith400NamingTheLink_insideItServed() throws Exception {
        String out = exchange("POST", "/v2/repository/models/linkout/load", "");
        assertTrue(out.startsWith("HTTP/1.1 400 "), out);
        assertTrue(out.contains("linkout/1/model.py") && out.contains("outside the model repository")
                && out.contains("--allow-links-outside-repository"), "names the link, where it points and what to do: " + out);
        String in = exchange("POST", "/v2/repository/models/linkin/load", "");
        assertTrue(in.startsWith("HTTP/1.1 200 "), "links inside the repository (a ConfigMap's ..data) are served: " + in);
        String answer = exchange("POST", "/v2/models/linkin/infer",
                "{\"inputs\":[{\"name\":\"IN\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[2.5]}]}");
        assertTrue(answer.startsWith("HTTP/1.1 200 ") && answer.contains("[2.5]"), answer);
    }

    private static String identityConfig(String name) {
        return """
                name: "%s"
                backend: "python"
                input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
                output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]
                instance_group [{ count: 1 kind: KIND_CPU }]
                """.formatted(name);
    }

    private String exchange(String method, String path, String body) throws IOException {
        byte[] content = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        String head = method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                + (body == null ? "" : "Content-Type: application/json\r\nContent-Length: " + content.length + "\r\n") + "\r\n";
        try (Socket s = new Socket("127.0.0.1", httpPort)) {
            s.setSoTimeout(120_000);
            s.getOutputStream().write(head.getBytes(StandardCharsets.ISO_8859_1));
            s.getOutputStream().write(content);
            return new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
