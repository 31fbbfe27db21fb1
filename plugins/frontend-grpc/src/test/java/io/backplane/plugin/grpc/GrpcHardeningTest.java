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
import io.backplane.protocol.inference.ModelConfigRequest;
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
import java.util.HashMap;
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

    void start(Map<String, String> extra) throws Exception {
        host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
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
        assertTrue(e.getStatus().getDescription().contains("This protocol is restricted, expecting header 'admin-key'"), e.getStatus().toString());
        assertTrue(host.isModelReady("identity", -1), "the refused unload did not run");

        Metadata wrong = new Metadata();
        wrong.put(Metadata.Key.of("admin-key", Metadata.ASCII_STRING_MARSHALLER), "nope");
        assertThrows(StatusRuntimeException.class, () -> c.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(wrong))
                .modelConfig(ModelConfigRequest.newBuilder().setName("identity").build()));

        Metadata right = new Metadata();
        right.put(Metadata.Key.of("admin-key", Metadata.ASCII_STRING_MARSHALLER), "s3cret");
        assertEquals("identity", c.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(right))
                .modelConfig(ModelConfigRequest.newBuilder().setName("identity").build()).getConfig().getName());
        assertTrue(c.serverLive(ServerLiveRequest.getDefaultInstance()).getLive(), "health is not restricted");
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
    void options_mutualWithoutRootCert_rejectedNamingIt() {
        var e = assertThrows(RuntimeException.class, () -> GrpcOptions.parse(Map.of("ssl_mutual", "true")));
        assertTrue(e.getMessage().contains("ssl_root_cert"), e.getMessage());
    }
}
