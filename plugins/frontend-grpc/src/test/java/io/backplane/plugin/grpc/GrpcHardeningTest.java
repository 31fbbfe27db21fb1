package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestCertificates;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.InferTensorContents;
import io.backplane.protocol.inference.ModelConfigRequest;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.RepositoryModelUnloadRequest;
import io.backplane.protocol.inference.ServerLiveRequest;
import io.backplane.spi.DataType;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.MetadataUtils;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The gRPC frontend's restricted protocols (Triton's --grpc-restricted-protocol), TLS and mutual TLS. */
class GrpcHardeningTest {
    @TempDir
    Path dir;

    BackplaneHost host;
    GrpcFrontend frontend;
    ManagedChannel channel;

    /** The host's memory budget for the next {@link #start} (0: the default). */
    long memoryBudget;

    void start(Map<String, String> extra) throws Exception {
        BackplaneHost.Builder builder = BackplaneHost.builder();
        if (memoryBudget > 0) {
            builder.memoryBudget(memoryBudget);
        }
        host = builder.backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build();
        Map<String, String> options = new HashMap<>(Map.of("host", "127.0.0.1", "port", "0"));
        options.putAll(extra);
        frontend = (GrpcFrontend) new GrpcFrontendFactory().create(TestSupport.context(host, options));
        frontend.start();
    }

    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub client(ChannelCredentials credentials, String authority) {
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", frontend.port(), credentials).overrideAuthority(authority).build();
        return GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    @AfterEach
    void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        if (frontend != null) {
            int port = frontend.port();
            frontend.close();
            TestSupport.assertPortClosed(port);
        }
        if (host != null) {
            host.close();
        }
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void restrictedProtocol_repositoryWithoutHeader_unavailableNamingTheHeader() throws Exception {
        start(Map.of("restricted_protocol", "model-repository,model-config:admin-key=s3cret"));
        var c = client(InsecureChannelCredentials.create(), "localhost");
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                () -> c.repositoryModelUnload(RepositoryModelUnloadRequest.newBuilder().setModelName("identity").build()));
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"),
                e.getStatus().toString());
        assertTrue(host.isModelReady("identity", -1), "the refused unload did not run");

        Metadata wrong = new Metadata();
        wrong.put(Metadata.Key.of("triton-grpc-protocol-admin-key", Metadata.ASCII_STRING_MARSHALLER), "nope");
        assertThrows(StatusRuntimeException.class, () -> c.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(wrong))
                .modelConfig(ModelConfigRequest.newBuilder().setName("identity").build()));

        Metadata bare = new Metadata(); // the REST header's name: not what a gRPC call must carry (Triton's prefix is missing)
        bare.put(Metadata.Key.of("admin-key", Metadata.ASCII_STRING_MARSHALLER), "s3cret");
        assertThrows(StatusRuntimeException.class, () -> c.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(bare))
                .modelConfig(ModelConfigRequest.newBuilder().setName("identity").build()));

        Metadata right = new Metadata();
        right.put(Metadata.Key.of("triton-grpc-protocol-admin-key", Metadata.ASCII_STRING_MARSHALLER), "s3cret");
        assertEquals("identity", c.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(right))
                .modelConfig(ModelConfigRequest.newBuilder().setName("identity").build()).getConfig().getName());
        assertTrue(c.serverLive(ServerLiveRequest.getDefaultInstance()).getLive(), "health is not restricted");
    }

    /** O1 over gRPC: a message the memory budget cannot hold is refused with RESOURCE_EXHAUSTED before its tensors are copied. */
    @Test
    void memoryBudget_messageOverBudget_resourceExhausted_thenServes() throws Exception {
        memoryBudget = 64 * 1024;
        start(Map.of());
        var c = client(InsecureChannelCredentials.create(), "localhost");
        ModelInferRequest big = infer(32 * 1024); // 128 KiB of FP32
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> c.modelInfer(big));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(e.getStatus().getDescription().contains("model 'identity'") && e.getStatus().getDescription().contains("memory budget"),
                e.getStatus().toString());
        assertEquals(1, c.modelInfer(infer(1)).getOutputsCount());
        assertEquals(1, host.memoryUsage().refused());
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (host.memoryUsage().heldBytes() != 0) {
            assertTrue(System.nanoTime() < deadline, "bytes still held: " + host.memoryUsage());
            Thread.sleep(5);
        }
    }

    /**
     * Issue 15 item 1 over gRPC: a message larger than the budget is refused while the transport
     * reads it, before it is assembled in direct memory, and nothing of it stays held.
     */
    @Test
    void memoryBudget_hugeMessage_refusedWhileRead_thenServes() throws Exception {
        memoryBudget = 4 << 20;
        start(Map.of());
        var c = client(InsecureChannelCredentials.create(), "localhost");
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> c.modelInfer(raw(4 << 20))); // 16 MiB
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode(), e.getStatus().toString());
        String d = e.getStatus().getDescription();
        assertTrue(d.contains("a gRPC message to") && d.contains("ModelInfer") && d.contains("memory budget"), d);
        assertTrue(host.memoryUsage().refused() >= 1, host.memoryUsage().toString());
        assertEquals(1, c.modelInfer(infer(1)).getOutputsCount());
        awaitNothingHeld();
    }

    /** Many large messages at once against a small budget: each call gets OK or RESOURCE_EXHAUSTED, never INTERNAL, and the budget empties. */
    @Test
    void memoryBudget_concurrentLargeMessages_okOrResourceExhausted() throws Exception {
        memoryBudget = 8 << 20;
        start(Map.of());
        var c = client(InsecureChannelCredentials.create(), "localhost");
        int callers = 8;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(callers);
        List<Status.Code> codes = java.util.Collections.synchronizedList(new ArrayList<>());
        try {
            java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
            List<java.util.concurrent.Future<?>> done = new ArrayList<>();
            for (int t = 0; t < callers; t++) {
                int floats = (3 << 20) / 4 + t * 4096; // about 3 MiB each, sizes differ
                done.add(pool.submit(() -> {
                    go.await();
                    for (int i = 0; i < 3; i++) {
                        try {
                            c.modelInfer(raw(floats));
                            codes.add(Status.Code.OK);
                        } catch (StatusRuntimeException ex) {
                            codes.add(ex.getStatus().getCode());
                            assertEquals(Status.Code.RESOURCE_EXHAUSTED, ex.getStatus().getCode(), ex.getStatus().toString());
                        }
                    }
                    return null;
                }));
            }
            go.countDown();
            for (java.util.concurrent.Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
        assertEquals(callers * 3, codes.size(), codes.toString());
        assertTrue(codes.contains(Status.Code.OK), codes.toString());
        assertEquals(1, c.modelInfer(infer(1)).getOutputsCount());
        awaitNothingHeld();
    }

    void awaitNothingHeld() throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (host.memoryUsage().heldBytes() != 0) {
            assertTrue(System.nanoTime() < deadline, "bytes still held: " + host.memoryUsage());
            Thread.sleep(5);
        }
    }

    static ModelInferRequest raw(int floats) {
        var in = ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(floats);
        return ModelInferRequest.newBuilder().setModelName("identity").addInputs(in)
                .addRawInputContents(com.google.protobuf.ByteString.copyFrom(new byte[floats * 4])).build();
    }

    static ModelInferRequest infer(int floats) {
        var in = ModelInferRequest.InferInputTensor.newBuilder().setName("IN0").setDatatype("FP32").addShape(floats);
        var contents = InferTensorContents.newBuilder();
        for (int i = 0; i < floats; i++) {
            contents.addFp32Contents(i);
        }
        return ModelInferRequest.newBuilder().setModelName("identity").addInputs(in.setContents(contents)).build();
    }

    /** O2: connections over max_connections are closed as they are accepted; a connection closing makes room again. */
    @Test
    void maxConnections_overTheCap_closedAtAccept_roomAgainAfterClose() throws Exception {
        start(Map.of("max_connections", "3"));
        List<java.net.Socket> held = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                java.net.Socket s = new java.net.Socket("127.0.0.1", frontend.port());
                held.add(s);
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (frontend.openConnections() < 3) {
                assertTrue(System.nanoTime() < deadline, "connections seen: " + frontend.openConnections());
                Thread.sleep(5);
            }
            try (java.net.Socket over = new java.net.Socket("127.0.0.1", frontend.port())) {
                over.setSoTimeout(10_000);
                assertEquals(-1, over.getInputStream().read(), "the connection over the cap is closed");
            }
            assertEquals(3, frontend.openConnections());
            var c = client(InsecureChannelCredentials.create(), "localhost");
            assertThrows(StatusRuntimeException.class, () -> c.withDeadlineAfter(2, TimeUnit.SECONDS).serverLive(ServerLiveRequest.getDefaultInstance()));
            held.removeFirst().close();
            deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (true) {
                try {
                    assertTrue(c.withDeadlineAfter(5, TimeUnit.SECONDS).withWaitForReady().serverLive(ServerLiveRequest.getDefaultInstance()).getLive());
                    break;
                } catch (StatusRuntimeException retry) {
                    assertTrue(System.nanoTime() < deadline, "no room after a connection closed: " + retry.getStatus());
                }
            }
        } finally {
            for (java.net.Socket s : held) {
                s.close();
            }
        }
    }

    @Test
    void tls_certificateFromFiles_servesTlsClients() throws Exception {
        TestCertificates.Pem server = TestCertificates.create(dir, "server");
        start(Map.of("ssl_cert", server.cert().toString(), "ssl_key", server.key().toString()));
        assertTrue(frontend.endpoint().startsWith("grpcs://"), frontend.endpoint());
        var c = client(TlsChannelCredentials.newBuilder().trustManager(server.cert().toFile()).build(), "localhost");
        assertTrue(c.serverLive(ServerLiveRequest.getDefaultInstance()).getLive());
    }

    @Test
    void mutualTls_clientWithoutCertificate_refusedAndClientWithOneServed() throws Exception {
        TestCertificates.Pem server = TestCertificates.create(dir, "server");
        TestCertificates.Pem clientCert = TestCertificates.create(dir, "client");
        start(Map.of("ssl_cert", server.cert().toString(), "ssl_key", server.key().toString(), "ssl_root_cert", clientCert.cert().toString(),
                "ssl_mutual", "true"));
        var anonymous = client(TlsChannelCredentials.newBuilder().trustManager(server.cert().toFile()).build(), "localhost");
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> anonymous.serverLive(ServerLiveRequest.getDefaultInstance()));
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);

        var known = client(TlsChannelCredentials.newBuilder().trustManager(server.cert().toFile())
                .keyManager(clientCert.cert().toFile(), clientCert.key().toFile()).build(), "localhost");
        assertTrue(known.serverLive(ServerLiveRequest.getDefaultInstance()).getLive());
    }

    @Test
    void options_flowControlWindow_defaultSixteenMiB_setOrRefusedNamingIt() {
        assertEquals(16 << 20, GrpcOptions.parse(Map.of()).flowControlWindowBytes());
        assertEquals(1 << 20, GrpcOptions.parse(Map.of("flow_control_window_bytes", "1048576")).flowControlWindowBytes());
        var e = assertThrows(RuntimeException.class, () -> GrpcOptions.parse(Map.of("flow_control_window_bytes", "1000")));
        assertTrue(e.getMessage().contains("flow_control_window_bytes"), e.getMessage());
    }

    @Test
    void options_mutualWithoutRootCert_rejectedNamingIt() {
        var e = assertThrows(RuntimeException.class, () -> GrpcOptions.parse(Map.of("ssl_mutual", "true")));
        assertTrue(e.getMessage().contains("ssl_root_cert"), e.getMessage());
    }
}
