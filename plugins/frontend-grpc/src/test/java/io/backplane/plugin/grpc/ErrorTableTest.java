package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.RepositoryModelLoadRequest;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * The error-code table of docs/protocols.md, row by row, through both real frontends of one host:
 * a model fails with each {@link ErrorCode} and the REST client sees the row's HTTP status, the
 * gRPC client the row's gRPC status, both with the model's message.
 */
class ErrorTableTest {
    BackplaneHost host;
    Frontend grpc;
    Frontend http;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub client;
    HttpClient rest;
    String base;

    @BeforeEach
    void start() throws Exception {
        host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.erroring("error")).model(TestBackend.identity("identity", DataType.FP32))
                .loadModel("error").loadModel("identity").build();
        grpc = new GrpcFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        grpc.start();
        http = new HttpFrontendFactory().create(TestSupport.context(host, Map.of("host", "127.0.0.1", "port", "0")));
        http.start();
        base = "http://" + http.endpoint().replaceFirst("^[a-z]+://", "");
        channel = Grpc.newChannelBuilder(grpc.endpoint().replaceFirst("^[a-z]+://", ""), InsecureChannelCredentials.create()).build();
        client = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
        rest = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterEach
    void stop() throws Exception {
        rest.close();
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        grpc.close();
        http.close();
        host.close();
        TestSupport.assertNoBackplaneThreads();
    }

    HttpResponse<String> post(String path, String body) throws Exception {
        return rest.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    static Status.Code code(Runnable r) {
        try {
            r.run();
        } catch (StatusRuntimeException e) {
            return e.getStatus().getCode();
        }
        throw new AssertionError("the call succeeded");
    }

    @ParameterizedTest(name = "{0} -> HTTP {1}, gRPC {2}")
    @CsvSource({
        "INVALID_ARGUMENT, 400, INVALID_ARGUMENT",
        "NOT_FOUND, 404, NOT_FOUND",
        "UNAVAILABLE, 503, UNAVAILABLE",
        "RESOURCE_EXHAUSTED, 503, RESOURCE_EXHAUSTED",
        "CANCELLED, 499, CANCELLED",
        "DEADLINE_EXCEEDED, 504, DEADLINE_EXCEEDED",
        "UNSUPPORTED, 501, UNIMPLEMENTED",
        "TOO_LARGE, 413, RESOURCE_EXHAUSTED",
        "INTERNAL, 500, INTERNAL",
        "UNKNOWN, 400, UNKNOWN",
        "ALREADY_EXISTS, 400, ALREADY_EXISTS",
    })
    void errorCode_fromTheModel_reachesRestAndGrpcAsTheTableSays(ErrorCode code, int http, Status.Code grpcCode) throws Exception {
        assertEquals(http, code.httpStatus());
        assertEquals(grpcCode.name(), code.grpcStatus());
        HttpResponse<String> r = post("/v2/models/error/infer",
                "{\"parameters\":{\"code\":\"" + code + "\"},\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}");
        assertEquals(http, r.statusCode(), r.body());
        assertTrue(r.body().contains("failed with " + code), r.body());
        ModelInferRequest req = GrpcFrontendTest.fp32("error", 1f).toBuilder()
                .putParameters("code", InferParameter.newBuilder().setStringParam(code.name()).build()).build();
        StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class, () -> client.modelInfer(req));
        assertEquals(grpcCode, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(String.valueOf(e.getStatus().getDescription()).contains("failed with " + code), e.getStatus().toString());
    }

    @Test
    void infer_duplicateRequestedOutput_isInvalidArgumentOverRestAndGrpc() throws Exception {
        HttpResponse<String> r = post("/v2/models/identity/infer", "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],"
                + "\"data\":[1]}],\"outputs\":[{\"name\":\"OUT0\"},{\"name\":\"OUT0\"}]}");
        assertEquals(400, r.statusCode(), r.body());
        assertTrue(r.body().contains("output 'OUT0' already exists in request"), r.body());
        ModelInferRequest req = GrpcFrontendTest.fp32("identity", 1f).toBuilder()
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUT0"))
                .addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName("OUT0")).build();
        StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class, () -> client.modelInfer(req));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
        assertTrue(String.valueOf(e.getStatus().getDescription()).contains("output 'OUT0' already exists in request"), e.getStatus().toString());
    }

    @Test
    void everyErrorCode_hasARowInTheTable() {
        assertEquals(11, ErrorCode.values().length, "a new ErrorCode needs a row here and in docs/protocols.md");
    }

    @Test
    void load_failure_saysFailedToLoadTheModel_overRestAndGrpc() throws Exception {
        HttpResponse<String> r = post("/v2/repository/models/nope/load", "");
        assertTrue(r.body().contains("failed to load 'nope'"), r.body());
        StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                () -> client.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("nope").build()));
        assertTrue(String.valueOf(e.getStatus().getDescription()).startsWith("failed to load 'nope', "), e.getStatus().toString());
    }

    @Test
    void load_outsideExplicitMode_isUnavailableWithTritonsWording() throws Exception {
        try (BackplaneHost none = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32)).build()) {
            Frontend g = new GrpcFrontendFactory().create(TestSupport.context(none, Map.of("host", "127.0.0.1", "port", "0")));
            Frontend h = new HttpFrontendFactory().create(TestSupport.context(none, Map.of("host", "127.0.0.1", "port", "0")));
            g.start();
            h.start();
            ManagedChannel ch = Grpc.newChannelBuilder(g.endpoint().replaceFirst("^[a-z]+://", ""), InsecureChannelCredentials.create()).build();
            try {
                var stub = GRPCInferenceServiceGrpc.newBlockingStub(ch).withDeadlineAfter(30, TimeUnit.SECONDS);
                StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                        () -> stub.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("identity").build()));
                assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode());
                assertTrue(String.valueOf(e.getStatus().getDescription()).contains("explicit model load / unload is not allowed if polling is enabled"),
                        e.getStatus().toString());
                HttpResponse<String> r = rest.send(HttpRequest.newBuilder(URI.create("http://" + h.endpoint().replaceFirst("^[a-z]+://", "")
                        + "/v2/repository/models/identity/unload")).POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(503, r.statusCode(), r.body());
                assertTrue(r.body().contains("explicit model load / unload is not allowed if polling is enabled"), r.body());
            } finally {
                ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                g.close();
                h.close();
            }
        }
    }
}
