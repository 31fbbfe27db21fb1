package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Stateful python models through the real REST and gRPC frontends on loopback ports: a model in
 * the shape of Triton's {@code sequence_py} (a counter per correlation id, plain and decoupled,
 * the decoupled one over gRPC streaming), and a model with control inputs and implicit state
 * whose initial value comes from a data file. Sequence ids are numbers and strings.
 */
class PythonSequenceTest {
    @TempDir
    Path temp;

    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    private BackplaneHost host(String... models) throws Exception {
        PythonApiTest.python();
        PythonApiTest api = new PythonApiTest();
        api.temp = temp;
        Path repo = api.repository(models);
        return BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE)
                .backendOption("python", StubSettings.INTERPRETER, PythonApiTest.PYTHON).build();
    }

    private static HttpResponse<String> post(String url, String body) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static String restBody(String input, String sequenceId, boolean start, boolean end, int value) {
        return "{\"parameters\":{\"sequence_id\":" + sequenceId + ",\"sequence_start\":" + start + ",\"sequence_end\":" + end + "},"
                + "\"inputs\":[{\"name\":\"" + input + "\",\"datatype\":\"INT32\",\"shape\":[1,1],\"data\":[" + value + "]}]}";
    }

    private static int restOutput(HttpResponse<String> r, String name) throws Exception {
        assertEquals(200, r.statusCode(), r.body());
        JsonNode outputs = StubJson.MAPPER.readTree(r.body()).get("outputs");
        for (JsonNode o : outputs) {
            if (o.get("name").asText().equals(name)) {
                return o.get("data").get(0).asInt();
            }
        }
        throw new AssertionError("no output " + name + " in " + r.body());
    }

    @Test
    void rest_sequencePy_countsPerSequence_interleaved_withNumericAndStringIds() throws Exception {
        try (BackplaneHost host = host("sequence_py", "sequence_state");
                Frontend f = host.frontendFactories().get("http").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            String url = f.endpoint() + "/v2/models/sequence_py/infer";
            // eight sequences on four candidate slots, each from its own thread
            ExecutorService pool = Executors.newFixedThreadPool(8);
            try {
                List<Future<String>> results = new ArrayList<>();
                for (int s = 0; s < 8; s++) {
                    String id = s % 2 == 0 ? Integer.toString(100 + s) : "\"seq-" + s + "\"";
                    results.add(pool.submit(() -> {
                        for (int i = 1; i <= 5; i++) {
                            int got = restOutput(post(url, restBody("INPUT0", id, i == 1, i == 5, 0)), "OUTPUT0");
                            if (got != i) {
                                return "sequence " + id + " request " + i + " answered " + got;
                            }
                        }
                        return "";
                    }));
                }
                for (Future<String> r : results) {
                    assertEquals("", r.get(120, TimeUnit.SECONDS));
                }
            } finally {
                pool.shutdownNow();
                assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
            }
            HttpResponse<String> unknown = post(url, restBody("INPUT0", "999", false, false, 0));
            assertEquals(400, unknown.statusCode(), unknown.body());
            assertTrue(unknown.body().contains("sequence 999 of model 'sequence_py' is unknown"), unknown.body());
            assertEquals(0, host.sequenceSlotsInUse());

            // implicit state from the data file (100), carried between requests and never returned
            String state = f.endpoint() + "/v2/models/sequence_state/infer";
            HttpResponse<String> first = post(state, restBody("INPUT", "\"abc\"", true, false, 5));
            assertEquals(105, restOutput(first, "OUTPUT"));
            assertTrue(!first.body().contains("STATE_OUT"), first.body());
            assertEquals(112, restOutput(post(state, restBody("INPUT", "\"abc\"", false, false, 7)), "OUTPUT"));
            assertEquals(113, restOutput(post(state, restBody("INPUT", "\"abc\"", false, true, 1)), "OUTPUT"));
            assertEquals(0, host.sequenceSlotsInUse());
        }
    }

    private static ModelInferRequest grpcRequest(String model, long id, boolean start, boolean end) {
        ByteBuffer b = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(0);
        return ModelInferRequest.newBuilder().setModelName(model)
                .putParameters("sequence_id", InferParameter.newBuilder().setInt64Param(id).build())
                .putParameters("sequence_start", InferParameter.newBuilder().setBoolParam(start).build())
                .putParameters("sequence_end", InferParameter.newBuilder().setBoolParam(end).build())
                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("INPUT0").setDatatype("INT32").addShape(1).addShape(1))
                .addRawInputContents(ByteString.copyFrom(b.array())).build();
    }

    private static int int32(ByteString raw) {
        return raw.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).getInt();
    }

    @Test
    void grpc_sequencePy_plainUnary_andDecoupledOverStreaming() throws Exception {
        try (BackplaneHost host = host("sequence_py", "sequence_py_decoupled");
                Frontend f = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            URI endpoint = URI.create(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(endpoint.getHost(), endpoint.getPort(), InsecureChannelCredentials.create()).build();
            try {
                var client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS);
                for (int i = 1; i <= 3; i++) {
                    assertEquals(i, int32(client.modelInfer(grpcRequest("sequence_py", 7, i == 1, i == 3)).getRawOutputContents(0)));
                }
                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> client.modelInfer(grpcRequest("sequence_py", 7, false, false)));
                assertTrue(e.getStatus().getDescription().contains("sequence 7 of model 'sequence_py' is unknown"), e.getStatus().getDescription());

                LinkedBlockingQueue<ModelStreamInferResponse> streamed = new LinkedBlockingQueue<>();
                CompletableFuture<Void> closed = new CompletableFuture<>();
                StreamObserver<ModelInferRequest> requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS)
                        .modelStreamInfer(new StreamObserver<>() {
                            @Override
                            public void onNext(ModelStreamInferResponse value) {
                                streamed.add(value);
                            }

                            @Override
                            public void onError(Throwable t) {
                                closed.completeExceptionally(t);
                            }

                            @Override
                            public void onCompleted() {
                                closed.complete(null);
                            }
                        });
                // two sequences interleaved on one stream, three responses per request
                for (int i = 1; i <= 3; i++) {
                    requests.onNext(grpcRequest("sequence_py_decoupled", 1, i == 1, i == 3));
                    requests.onNext(grpcRequest("sequence_py_decoupled", 2, i == 1, i == 3));
                    for (int k = 0; k < 6; k++) {
                        ModelStreamInferResponse s = streamed.poll(120, TimeUnit.SECONDS);
                        assertTrue(s != null && s.getErrorMessage().isEmpty(), String.valueOf(s));
                        assertEquals(i, int32(s.getInferResponse().getRawOutputContents(0)), s.toString());
                    }
                }
                requests.onCompleted();
                closed.get(120, TimeUnit.SECONDS);
                assertNull(streamed.poll());
                assertEquals(0, host.sequenceSlotsInUse());
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void grpc_iterativeSequence_oneRequestManyExecutions_overStreaming() throws Exception {
        try (BackplaneHost host = host("iterative_sequence");
                Frontend f = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            f.start();
            URI endpoint = URI.create(f.endpoint().contains("://") ? f.endpoint() : "grpc://" + f.endpoint());
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(endpoint.getHost(), endpoint.getPort(), InsecureChannelCredentials.create()).build();
            try {
                LinkedBlockingQueue<ModelStreamInferResponse> streamed = new LinkedBlockingQueue<>();
                CompletableFuture<Void> closed = new CompletableFuture<>();
                StreamObserver<ModelInferRequest> requests = GRPCInferenceServiceGrpc.newStub(channel).withDeadlineAfter(120, TimeUnit.SECONDS)
                        .modelStreamInfer(new StreamObserver<>() {
                            @Override
                            public void onNext(ModelStreamInferResponse value) {
                                streamed.add(value);
                            }

                            @Override
                            public void onError(Throwable t) {
                                closed.completeExceptionally(t);
                            }

                            @Override
                            public void onCompleted() {
                                closed.complete(null);
                            }
                        });
                // no sequence id: each request is an iterative sequence of its own; the second waits for the one slot
                for (int round = 0; round < 10; round++) {
                    for (int n : new int[] {3, 2}) {
                        ByteBuffer b = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(n);
                        requests.onNext(ModelInferRequest.newBuilder().setModelName("iterative_sequence").setId("r" + n)
                                .addInputs(ModelInferRequest.InferInputTensor.newBuilder().setName("IN").setDatatype("INT32").addShape(1))
                                .addRawInputContents(ByteString.copyFrom(b.array())).build());
                    }
                    Map<String, List<Integer>> got = new java.util.TreeMap<>();
                    for (int k = 0; k < 5; k++) {
                        ModelStreamInferResponse s = streamed.poll(60, TimeUnit.SECONDS);
                        assertTrue(s != null && s.getErrorMessage().isEmpty(), "round " + round + ": " + s + " after " + got);
                        got.computeIfAbsent(s.getInferResponse().getId(), x -> new ArrayList<>())
                                .add(int32(s.getInferResponse().getRawOutputContents(0)));
                    }
                    assertEquals(Map.of("r3", List.of(2, 1, 0), "r2", List.of(1, 0)), got, "round " + round);
                }
                requests.onCompleted();
                closed.get(120, TimeUnit.SECONDS);
                assertNull(streamed.poll());
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (host.sequenceSlotsInUse() != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertEquals(0, host.sequenceSlotsInUse());
                assertEquals(0, host.openRequests());
            } finally {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
        }
    }
}
