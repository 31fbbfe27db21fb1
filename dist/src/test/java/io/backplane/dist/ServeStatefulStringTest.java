package io.backplane.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelReadyRequest;
import io.backplane.protocol.inference.ServerReadyRequest;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
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
 * R1 through the real server with its default flags (issue 33, item 8: Triton's {@code string}
 * and {@code string_fixed} QA models answer by how many requests they have seen, and failed when
 * a request no client sent reached them): a python model that counts its requests and answers
 * BYTES tensors built as those models build them ({@code np.bytes_}, {@code np.object_}, an empty
 * {@code np.object_} array) sees exactly the client's requests, over REST and gRPC, with readiness
 * probes of both protocols between them.
 */
@Timeout(300)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ServeStatefulStringTest {
    private static final String MODEL_PY = """
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def initialize(self, args):
                    self.seen = 0

                def execute(self, requests):
                    responses = []
                    for request in requests:
                        self.seen += 1
                        text = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[0]
                        answer = b"%d:" % self.seen + bytes(text)
                        dtype = np.bytes_ if self.seen % 2 else np.object_
                        responses.append(pb_utils.InferenceResponse([
                            pb_utils.Tensor("OUTPUT0", np.array([answer], dtype=dtype)),
                            pb_utils.Tensor("EMPTY", np.array([], dtype=np.object_))]))
                    return responses
            """;

    @TempDir
    static Path dir;
    ServeProcess server;
    int httpPort;
    ManagedChannel channel;

    @BeforeAll
    void serve() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(ServeProcess.DIST.resolve("backends/python")), "the layout has no python backend");
        Process p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).start();
        Assumptions.assumeTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "python3 with numpy is needed");
        Path repo = dir.resolve("repo");
        Files.createDirectories(repo.resolve("counts/1"));
        Files.writeString(repo.resolve("counts/1/model.py"), MODEL_PY);
        Files.writeString(repo.resolve("counts/config.pbtxt"), """
                name: "counts"
                backend: "python"
                input [{ name: "INPUT0" data_type: TYPE_STRING dims: [1] }]
                output [{ name: "OUTPUT0" data_type: TYPE_STRING dims: [1] }, { name: "EMPTY" data_type: TYPE_STRING dims: [-1] }]
                instance_group [{ count: 1 kind: KIND_CPU }]
                """);
        server = ServeProcess.in(dir, "serve").repository(repo).loadModels("counts").frontends("http", "grpc").args("--exit-timeout-secs", "3")
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
    void countingStringModel_seesExactlyTheClientsRequests_restAndGrpc_probesBetween() throws Exception {
        var grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel);
        List<String> answers = new ArrayList<>();
        for (int i = 1; i <= 6; i++) {
            // probes of both protocols before each request: none of them may reach the model
            String ready = exchange("GET", "/v2/health/ready", null);
            assertTrue(ready.startsWith("HTTP/1.1 200 "), ready + server.output());
            String modelReady = exchange("GET", "/v2/models/counts/ready", null);
            assertTrue(modelReady.startsWith("HTTP/1.1 200 "), modelReady + server.output());
            assertTrue(grpc.withDeadlineAfter(30, TimeUnit.SECONDS).serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
            assertTrue(grpc.withDeadlineAfter(30, TimeUnit.SECONDS).modelReady(ModelReadyRequest.newBuilder().setName("counts").build()).getReady());
            String text = "é-" + i;
            if (i % 2 == 1) {
                String r = exchange("POST", "/v2/models/counts/infer",
                        "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"" + text + "\"]}]}");
                assertTrue(r.startsWith("HTTP/1.1 200 "), r);
                assertTrue(r.contains("\"shape\":[0]"), "the empty np.object_ output: " + r);
                int at = r.indexOf("\"data\":[\"") + 9;
                answers.add(r.substring(at, r.indexOf('"', at)));
            } else {
                byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
                ByteBuffer raw = ByteBuffer.allocate(4 + utf8.length).order(ByteOrder.LITTLE_ENDIAN).putInt(utf8.length).put(utf8);
                ModelInferResponse r = grpc.withDeadlineAfter(60, TimeUnit.SECONDS).modelInfer(ModelInferRequest.newBuilder().setModelName("counts")
                        .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("INPUT0").setDatatype("BYTES").addShape(1))
                        .addRawInputContents(ByteString.copyFrom(raw.array())).build());
                int out = r.getOutputs(0).getName().equals("OUTPUT0") ? 0 : 1;
                ByteBuffer b = r.getRawOutputContents(out).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
                byte[] s = new byte[b.getInt()];
                b.get(s);
                answers.add(new String(s, StandardCharsets.UTF_8));
                assertEquals(0, r.getRawOutputContents(1 - out).size(), "the empty np.object_ output");
                assertEquals(List.of(0L), r.getOutputs(1 - out).getShapeList());
            }
        }
        assertEquals(List.of("1:é-1", "2:é-2", "3:é-3", "4:é-4", "5:é-5", "6:é-6"), answers,
                "the model saw exactly the client's requests, in order");
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
