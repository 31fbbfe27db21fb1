package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ServerReadyRequest;
import io.backplane.spi.DataType;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The standard gRPC health service ({@code grpc.health.v1.Health}) on a started frontend, called with
 * grpc-java's own HealthGrpc stubs, the way Kubernetes' gRPC probes and grpc-health-probe call it.
 */
@Timeout(60) // a Watch the frontend's close failed to end would hold close for drain_timeout_ms (set far above this)
class GrpcHealthTest {
    static final HealthCheckRequest SERVER = HealthCheckRequest.getDefaultInstance();

    TestBackend backend;
    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;
    HealthGrpc.HealthBlockingStub health;
    int port;

    void start(Map<String, String> extra) throws Exception {
        backend = new TestBackend();
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build();
        Map<String, String> options = new HashMap<>(Map.of("host", "127.0.0.1", "port", "0", "drain_timeout_ms", "600000"));
        options.putAll(extra);
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, options));
        frontend.start();
        port = frontend.port();
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", port, InsecureChannelCredentials.create()).build();
        health = HealthGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        if (frontend != null) {
            frontend.close();
            assertEquals(0, frontend.openHealthWatches(), "watches left open after close");
            TestSupport.assertPortClosed(port);
        }
        if (host != null) {
            host.close();
        }
        TestSupport.assertNoBackplaneThreads();
    }

    static HealthCheckRequest service(String name) {
        return HealthCheckRequest.newBuilder().setService(name).build();
    }

    @Test
    void check_ready_servingForTheServerAndTheInferenceService() throws Exception {
        start(Map.of());
        assertEquals(ServingStatus.SERVING, health.check(SERVER).getStatus());
        assertEquals(ServingStatus.SERVING, health.check(service(GRPCInferenceServiceGrpc.SERVICE_NAME)).getStatus());
    }

    @Test
    void check_unknownService_notFoundNamingTheKnownOnes() throws Exception {
        start(Map.of());
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> health.check(service("nope.Service")));
        assertEquals(Status.Code.NOT_FOUND, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(e.getStatus().getDescription().contains("unknown service 'nope.Service'")
                && e.getStatus().getDescription().contains(GRPCInferenceServiceGrpc.SERVICE_NAME), e.getStatus().toString());
    }

    /** The same source of truth as ServerReady, asked afresh on every call: never a stale answer. */
    @Test
    void check_instancesNotReady_notServing_asServerReady_thenServingAgain() throws Exception {
        start(Map.of());
        var inference = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
        backend.ready = false;
        assertEquals(ServingStatus.NOT_SERVING, health.check(SERVER).getStatus());
        assertFalse(inference.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
        backend.ready = true;
        assertEquals(ServingStatus.SERVING, health.check(SERVER).getStatus());
        assertTrue(inference.serverReady(ServerReadyRequest.getDefaultInstance()).getReady());
    }

    @Test
    void check_hostShutDown_notServing() throws Exception {
        start(Map.of());
        host.close();
        assertEquals(ServingStatus.NOT_SERVING, health.check(SERVER).getStatus());
    }

    @Test
    void watch_currentStatus_thenChanges_thenFrontendCloseEndsIt() throws Exception {
        start(Map.of());
        Iterator<HealthCheckResponse> watch = health.watch(SERVER);
        assertEquals(ServingStatus.SERVING, watch.next().getStatus());
        assertEquals(1, frontend.openHealthWatches());
        backend.ready = false;
        assertEquals(ServingStatus.NOT_SERVING, watch.next().getStatus(), "the next poll tells the change");
        backend.ready = true;
        assertEquals(ServingStatus.SERVING, watch.next().getStatus());

        frontend.close(); // would wait drain_timeout_ms (past this test's timeout) if the watch stayed open
        assertEquals(0, frontend.openHealthWatches());
        assertEquals(ServingStatus.NOT_SERVING, watch.next().getStatus(), "a closing frontend says NOT_SERVING last");
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, watch::hasNext);
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
    }

    @Test
    void watch_unknownService_serviceUnknown_andCloseEndsIt() throws Exception {
        start(Map.of());
        Iterator<HealthCheckResponse> watch = health.watch(service("nope.Service"));
        assertEquals(ServingStatus.SERVICE_UNKNOWN, watch.next().getStatus());
        frontend.close();
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, watch::hasNext);
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
    }

    @Test
    void watch_clientCancels_watchForgotten() throws Exception {
        start(Map.of());
        CountDownLatch first = new CountDownLatch(1);
        ClientCallStreamObserver<?>[] call = new ClientCallStreamObserver<?>[1];
        HealthGrpc.newStub(channel).watch(SERVER, new ClientResponseObserver<HealthCheckRequest, HealthCheckResponse>() {
            @Override
            public void beforeStart(ClientCallStreamObserver<HealthCheckRequest> requestStream) {
                call[0] = requestStream;
            }

            @Override
            public void onNext(HealthCheckResponse value) {
                first.countDown();
            }

            @Override
            public void onError(Throwable t) {
            }

            @Override
            public void onCompleted() {
            }
        });
        assertTrue(first.await(30, TimeUnit.SECONDS), "no first status");
        assertEquals(1, frontend.openHealthWatches());
        call[0].cancel("test done", null);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (frontend.openHealthWatches() != 0) {
            assertTrue(System.nanoTime() < deadline, "the cancelled watch is still held");
            Thread.sleep(5);
        }
    }

    /** Triton restricts the standard health service with the {@code health} group, as ServerLive/ServerReady/ModelReady. */
    @Test
    void restrictedHealth_checkNeedsTheHeader() throws Exception {
        start(Map.of("restricted_protocol", "health:probe-key=s3cret"));
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> health.check(SERVER));
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("This protocol is restricted, expecting header 'triton-grpc-protocol-probe-key'"),
                e.getStatus().toString());
        Metadata right = new Metadata();
        right.put(Metadata.Key.of("triton-grpc-protocol-probe-key", Metadata.ASCII_STRING_MARSHALLER), "s3cret");
        assertEquals(ServingStatus.SERVING, health.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(right)).check(SERVER).getStatus());
    }

    @Test
    void restrictedOtherGroups_checkAnswersWithoutHeader() throws Exception {
        start(Map.of("restricted_protocol", "metadata,inference,model-repository:admin-key=s3cret"));
        assertEquals(ServingStatus.SERVING, health.check(SERVER).getStatus());
    }
}
