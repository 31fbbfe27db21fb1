package io.backplane.dist;

import static io.backplane.dist.ServeProcess.shmFiles;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ByteString;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * DESIGN R2 and B6 through the real server on the python backend: {@code bin/backplane serve} as a
 * child process, two Triton python_backend models that run until {@code request.is_cancelled()}
 * and write what they saw to a marks file. A REST client that closes its connection mid-execute,
 * an SSE {@code generate_stream} closed after three events, a gRPC call cancelled mid-execute, a
 * ModelStreamInfer stream cancelled after three responses: each model sees the cancellation. A
 * REST request queued behind a busy instance counts in {@code nv_inference_pending_request_count}
 * (the executing one does not); when its client goes away it is removed at once and never reaches
 * the model. The server then serves the next request; at the end it exits cleanly and
 * leaves no stub or shared-memory file.
 */
@Timeout(300)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ServeCancellationTest {
    private static final Path DIST = ServeProcess.DIST;
    private static final Duration PATIENCE = Duration.ofSeconds(60);

    /** {@code mode} "hold": a plain model that waits per request; "tokens": a decoupled one that streams until cancelled. */
    private static final String MODEL_PY = """
            import json, os, time
            import numpy as np
            import triton_python_backend_utils as pb_utils

            PATIENCE_S = 60

            class TritonPythonModel:
                def initialize(self, args):
                    p = json.loads(args["model_config"])["parameters"]
                    self.mode = p["mode"]["string_value"]
                    self.marks = p["marks"]["string_value"]

                def note(self, what):
                    with open(self.marks, "a") as f:
                        f.write(what + "\\n")

                def execute(self, requests):
                    if self.mode == "tokens":
                        for r in requests:
                            self.stream(r)
                        return None
                    return [self.hold(r) for r in requests]

                def hold(self, r):
                    x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                    tag = str(int(x.reshape(-1)[0]))
                    self.note("start " + tag)
                    release = os.path.join(os.path.dirname(self.marks), "release-" + tag)
                    deadline = time.monotonic() + PATIENCE_S
                    while time.monotonic() < deadline:
                        if r.is_cancelled():
                            self.note("cancelled " + tag)
                            return pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED))
                        if os.path.exists(release):
                            self.note("released " + tag)
                            return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)])
                        time.sleep(0.002)
                    self.note("timeout " + tag)
                    return pb_utils.InferenceResponse(error=pb_utils.TritonError("request %s was never cancelled" % tag))

                def stream(self, r):
                    text = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy().reshape(-1)[0]
                    tag = text.decode() if isinstance(text, bytes) else str(text)
                    self.note("start " + tag)
                    sender = r.get_response_sender()
                    n = 0
                    deadline = time.monotonic() + PATIENCE_S
                    while not r.is_cancelled() and time.monotonic() < deadline:
                        token = np.array([("token %d" % n).encode()], dtype=np.object_)
                        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", token)]))
                        n += 1
                        time.sleep(0.005)
                    self.note(("cancelled " if r.is_cancelled() else "timeout ") + tag + " after " + str(n))
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            """;

    @TempDir
    static Path dir;
    ServeProcess server;
    int httpPort;
    int grpcPort;
    int metricsPort;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceStub grpc;

    @BeforeAll
    void serve() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(DIST.resolve("backends/python")), "the layout has no python backend");
        Process p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).start();
        Assumptions.assumeTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "python3 with numpy is needed");
        Path repo = dir.resolve("repo");
        model(repo, "wait", "hold", false, "IN", "TYPE_INT32", "OUT", "TYPE_INT32", -1);
        model(repo, "tokens", "tokens", true, "text_input", "TYPE_STRING", "text_output", "TYPE_STRING", 1);
        server = ServeProcess.in(dir, "serve").repository(repo).loadModels("wait", "tokens").args("--builtin-warmup=false", "--exit-timeout-secs", "3")
                .env("JAVA_OPTS", "-Xmx256m -Djava.io.tmpdir=" + Files.createDirectories(dir.resolve("tmp"))).start();
        server.awaitStarted(Duration.ofSeconds(240));
        httpPort = server.port("http");
        grpcPort = server.port("grpc");
        metricsPort = server.port("metrics");
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcPort, InsecureChannelCredentials.create()).build();
        grpc = GRPCInferenceServiceGrpc.newStub(channel);
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
            if (!s.isAlive()) {
                return;
            }
            List<ProcessHandle> stubs = s.descendants();
            s.signal("TERM", false); // the server drains and exits
            assertEquals(0, s.awaitExit(), s.output());
            for (ProcessHandle stub : stubs) {
                await(() -> !stub.isAlive(), Duration.ofSeconds(30), "stub " + stub.pid() + " left running");
            }
            assertEquals(List.of(), shmFiles(s.pid()), "shared-memory files left");
        }
        assertFalse(marks("wait").stream().anyMatch(m -> m.startsWith("timeout")) || marks("tokens").stream().anyMatch(m -> m.startsWith("timeout")),
                "a model waited for a cancellation that never came: " + marks("wait") + " " + marks("tokens"));
    }

    @Test
    void rest_clientClosesConnectionMidExecute_pythonModelSeesCancellation_nextRequestServed() throws Exception {
        try (Socket s = new Socket("127.0.0.1", httpPort)) {
            s.getOutputStream().write(post("/v2/models/wait/infer", inferJson(11)));
            awaitMark("wait", "start 11");
        }
        awaitMark("wait", "cancelled 11");
        release(12);
        String next = exchange(post("/v2/models/wait/infer", inferJson(12)));
        assertTrue(next.startsWith("HTTP/1.1 200 ") && next.contains("[12]"), next);
    }

    @Test
    void sse_generateStreamClosedAfterThreeEvents_pythonModelSeesCancellationAndStops() throws Exception {
        try (Socket s = new Socket("127.0.0.1", httpPort)) {
            s.setSoTimeout(60_000);
            s.getOutputStream().write(post("/v2/models/tokens/generate_stream", "{\"text_input\":\"sse\"}"));
            InputStream in = s.getInputStream();
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            byte[] buf = new byte[256];
            while (count(got.toString(StandardCharsets.ISO_8859_1), "data: ") < 3) {
                int n = in.read(buf);
                assertTrue(n > 0, "the stream ended before three events: " + got.toString(StandardCharsets.ISO_8859_1));
                got.write(buf, 0, n);
            }
            String head = got.toString(StandardCharsets.ISO_8859_1);
            assertTrue(head.startsWith("HTTP/1.1 200 ") && head.contains("token 2"), head);
        }
        awaitMark("tokens", m -> m.startsWith("cancelled sse after "), "the model saw the closed stream as a cancellation");
    }

    @Test
    void grpc_callCancelledMidExecute_pythonModelSeesCancellation_nextCallServed() throws Exception {
        Context.CancellableContext call = Context.current().withCancellation();
        CompletableFuture<ModelInferResponse> cancelled = new CompletableFuture<>();
        call.run(() -> grpc.modelInfer(inferProto(31), observer(cancelled)));
        awaitMark("wait", "start 31");
        call.cancel(null);
        awaitMark("wait", "cancelled 31");
        try {
            cancelled.get(60, TimeUnit.SECONDS);
            fail("the cancelled call got an answer");
        } catch (java.util.concurrent.ExecutionException e) {
            assertEquals(Status.Code.CANCELLED, Status.fromThrowable(e.getCause()).getCode());
        }
        release(32);
        CompletableFuture<ModelInferResponse> next = new CompletableFuture<>();
        grpc.modelInfer(inferProto(32), observer(next));
        assertEquals("OUT", next.get(60, TimeUnit.SECONDS).getOutputs(0).getName());
    }

    @Test
    void grpc_streamCancelledAfterThreeResponses_pythonModelSeesCancellation_noMoreResponses() throws Exception {
        List<ModelStreamInferResponse> got = new java.util.concurrent.CopyOnWriteArrayList<>();
        CompletableFuture<Void> three = new CompletableFuture<>();
        CompletableFuture<Throwable> end = new CompletableFuture<>();
        StreamObserver<ModelInferRequest> requests = grpc.modelStreamInfer(new ClientResponseObserver<ModelInferRequest, ModelStreamInferResponse>() {
            @Override
            public void beforeStart(ClientCallStreamObserver<ModelInferRequest> c) {
                c.disableAutoRequestWithInitial(3); // a client that reads three responses and stops reading
            }

            @Override
            public void onNext(ModelStreamInferResponse r) {
                got.add(r);
                if (got.size() == 3) {
                    three.complete(null);
                }
            }

            @Override
            public void onError(Throwable t) {
                end.complete(t);
            }

            @Override
            public void onCompleted() {
                end.complete(null);
            }
        });
        requests.onNext(ModelInferRequest.newBuilder().setModelName("tokens").addInputs(ModelInferRequest.InferInputTensor.newBuilder()
                .setName("text_input").setDatatype("BYTES").addShape(1).setContents(InferTensorContents.newBuilder().addBytesContents(ByteString.copyFromUtf8("grpc"))))
                .build());
        three.get(60, TimeUnit.SECONDS);
        ((ClientCallStreamObserver<ModelInferRequest>) requests).cancel("the client goes away", null);
        awaitMark("tokens", m -> m.startsWith("cancelled grpc after "), "the model saw the cancelled stream");
        assertEquals(Status.Code.CANCELLED, Status.fromThrowable(end.get(60, TimeUnit.SECONDS)).getCode());
        assertEquals(3, got.size(), "nothing reached the cancelled stream after the three responses it read");
        got.forEach(r -> assertEquals("", r.getErrorMessage()));
    }

    @Test
    void rest_queuedRequestWhoseClientCloses_countedPendingThenRemovedAtOnce_neverReachesThePythonModel() throws Exception {
        await(() -> metric("backplane_inference_inflight_requests") == 0, Duration.ofSeconds(60), "the earlier tests' requests did not end");
        long cancelledBefore = metric("backplane_inference_failure_total", "reason=\"canceled\"");
        try (Socket held = new Socket("127.0.0.1", httpPort)) {
            held.setSoTimeout(60_000);
            held.getOutputStream().write(post("/v2/models/wait/infer", inferJson(51)));
            awaitMark("wait", "start 51");
            try (Socket queued = new Socket("127.0.0.1", httpPort)) {
                queued.getOutputStream().write(post("/v2/models/wait/infer", inferJson(52)));
                // accepted and waiting behind request 51 on the only instance
                await(() -> metric("backplane_inference_inflight_requests") == 2, Duration.ofSeconds(60), "request 52 was not queued");
                // Triton's pending count: the one waiting, not the one executing (issue 34)
                await(() -> metric("nv_inference_pending_request_count") == 1, Duration.ofSeconds(30),
                        "nv_inference_pending_request_count did not count the queued request 52 alone");
            } // its client goes away while it waits
            await(() -> metric("backplane_inference_failure_total", "reason=\"canceled\"") == cancelledBefore + 1, Duration.ofSeconds(30),
                    "the queued request was not cancelled while the instance was busy");
            assertEquals(1, metric("backplane_inference_inflight_requests"), "only the held request is left");
            assertEquals(0, metric("nv_inference_pending_request_count"), "the cancelled request left the queue");
            release(51);
            String answer = new String(held.getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
            assertTrue(answer.startsWith("HTTP/1.1 200 ") && answer.contains("[51]"), "the held request completes normally: " + answer);
        }
        release(53);
        String next = exchange(post("/v2/models/wait/infer", inferJson(53)));
        assertTrue(next.startsWith("HTTP/1.1 200 ") && next.contains("[53]"), next);
        List<String> marks = marks("wait");
        assertTrue(marks.contains("start 53"), marks.toString());
        assertFalse(marks.contains("start 52"), "the cancelled queued request reached the model: " + marks);
    }

    // ---- helpers ----

    private void model(Path repo, String name, String mode, boolean decoupled, String in, String inType, String out, String outType, int dims)
            throws IOException {
        Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.writeString(repo.resolve(name).resolve("1/model.py"), MODEL_PY);
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), """
                name: "%s"
                backend: "python"
                model_transaction_policy { decoupled: %s }
                input [{ name: "%s" data_type: %s dims: [%d] }]
                output [{ name: "%s" data_type: %s dims: [%d] }]
                instance_group [{ count: 1 kind: KIND_CPU }]
                parameters { key: "mode" value { string_value: "%s" } }
                parameters { key: "marks" value { string_value: "%s" } }
                """.formatted(name, decoupled, in, inType, dims, out, outType, dims, mode, dir.resolve("marks-" + name)));
    }

    private List<String> marks(String model) throws IOException {
        Path f = dir.resolve("marks-" + model);
        return Files.exists(f) ? Files.readAllLines(f) : List.of();
    }

    private void awaitMark(String model, String mark) throws Exception {
        awaitMark(model, mark::equals, "mark '" + mark + "'");
    }

    private void awaitMark(String model, java.util.function.Predicate<String> mark, String what) throws Exception {
        await(() -> {
            try {
                return marks(model).stream().anyMatch(mark);
            } catch (IOException e) {
                return false;
            }
        }, PATIENCE, what + " of model '" + model + "'");
    }

    private void release(int tag) throws IOException {
        Files.writeString(dir.resolve("release-" + tag), "");
    }

    private void await(BooleanSupplier condition, Duration limit, String message) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                String marks;
                try {
                    marks = "marks: wait " + marks("wait") + ", tokens " + marks("tokens");
                } catch (IOException e) {
                    marks = e.toString();
                }
                fail(message + " within " + limit.toSeconds() + " s; " + marks + "\n" + server.output());
            }
            Thread.sleep(20);
        }
    }

    /** A metric of model 'wait' version 1 from the metrics endpoint, 0 when absent. */
    private long metric(String name, String... labels) {
        try (Socket s = new Socket("127.0.0.1", metricsPort)) {
            s.setSoTimeout(30_000);
            s.getOutputStream().write("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
            String text = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            for (String line : text.split("\n")) {
                if (line.startsWith(name + "{") && line.contains("model=\"wait\"") && line.contains("version=\"1\"") && List.of(labels).stream().allMatch(line::contains)) {
                    return (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1).trim());
                }
            }
            return 0;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private String exchange(byte[] request) throws IOException {
        try (Socket s = new Socket("127.0.0.1", httpPort)) {
            s.setSoTimeout(60_000);
            s.getOutputStream().write(request);
            return new String(s.getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
        }
    }

    private static byte[] post(String path, String body) {
        return ("POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: "
                + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body).getBytes(StandardCharsets.UTF_8);
    }

    private static String inferJson(int tag) {
        return "{\"inputs\":[{\"name\":\"IN\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[" + tag + "]}]}";
    }

    private static ModelInferRequest inferProto(int tag) {
        return ModelInferRequest.newBuilder().setModelName("wait").addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN")
                .setDatatype("INT32").addShape(1).setContents(InferTensorContents.newBuilder().addIntContents(tag))).build();
    }

    private static int count(String s, String what) {
        int n = 0;
        for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + what.length())) {
            n++;
        }
        return n;
    }

    private static StreamObserver<ModelInferResponse> observer(CompletableFuture<ModelInferResponse> into) {
        return new StreamObserver<>() {
            @Override
            public void onNext(ModelInferResponse r) {
                into.complete(r);
            }

            @Override
            public void onError(Throwable t) {
                into.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
            }
        };
    }
}
