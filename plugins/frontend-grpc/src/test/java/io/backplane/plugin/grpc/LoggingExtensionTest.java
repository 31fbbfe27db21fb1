package io.backplane.plugin.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.backplane.core.BackplaneHost;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.LogSettingsRequest;
import io.backplane.protocol.inference.LogSettingsResponse;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.LogControl;
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
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Triton's logging extension through both real frontends: REST {@code /v2/logging} and gRPC
 * {@code LogSettings} over the host's {@link LogControl} (here an embedding host's own, which
 * keeps the settings and refuses a log file), listed as an extension only when the host offers it.
 */
class LoggingExtensionTest {
    static final ObjectMapper JSON = new ObjectMapper();

    /** An embedding host's control: holds the settings, takes no log file. */
    static final class HostLogs implements LogControl {
        private Settings now = new Settings("", true, true, true, 0, "default");

        @Override
        public synchronized Settings settings() {
            return now;
        }

        @Override
        public synchronized Settings update(Settings wanted) {
            if (!wanted.file().isEmpty()) {
                throw new BackplaneException(io.backplane.spi.ErrorCode.UNSUPPORTED, "log setting 'log_file' = '" + wanted.file() + "' is not served");
            }
            now = wanted;
            return now;
        }
    }

    BackplaneHost host;
    final List<AutoCloseable> open = new ArrayList<>();
    HttpClient rest = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

    @AfterEach
    void stop() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
        rest.close();
        if (host != null) {
            host.close();
        }
        TestSupport.assertNoBackplaneThreads();
    }

    static FrontendContext context(InferenceService service, @Nullable LogControl logs) {
        Map<String, String> options = Map.of("host", "127.0.0.1", "port", "0");
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }

            @Override
            public @Nullable LogControl logControl() {
                return logs;
            }
        };
    }

    record Endpoints(String base, GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc) {
    }

    Endpoints start(@Nullable LogControl logs) throws Exception {
        host = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build();
        Frontend http = new HttpFrontendFactory().create(context(host, logs));
        open.add(http);
        http.start();
        Frontend grpc = new GrpcFrontendFactory().create(context(host, logs));
        open.add(grpc);
        grpc.start();
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", ((GrpcFrontend) grpc).port(), InsecureChannelCredentials.create()).build();
        open.add(() -> channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS));
        return new Endpoints("http://" + http.endpoint().replaceFirst("^[a-z]+://", ""),
                GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS));
    }

    HttpResponse<String> send(String method, String url, String body) throws Exception {
        return rest.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(20)).method(method,
                body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void logging_restAndGrpc_readAndChangeTheHostsSettings() throws Exception {
        HostLogs logs = new HostLogs();
        Endpoints e = start(logs);
        JsonNode v2 = JSON.readTree(send("GET", e.base() + "/v2", null).body());
        assertTrue(v2.get("extensions").toString().contains("\"logging\""), v2.toString());
        assertTrue(e.grpc().serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList().contains("logging"));

        JsonNode got = JSON.readTree(send("GET", e.base() + "/v2/logging", null).body());
        assertEquals("{\"log_file\":\"\",\"log_info\":true,\"log_warning\":true,\"log_error\":true,\"log_verbose_level\":0,\"log_format\":\"default\"}",
                got.toString());

        HttpResponse<String> post = send("POST", e.base() + "/v2/logging", "{\"log_verbose_level\":2,\"log_info\":true}");
        assertEquals(200, post.statusCode(), post.body());
        assertEquals(2, JSON.readTree(post.body()).get("log_verbose_level").asInt());
        assertEquals(2, logs.settings().verboseLevel());

        LogSettingsResponse r = e.grpc().logSettings(LogSettingsRequest.newBuilder()
                .putSettings("log_verbose_level", LogSettingsRequest.SettingValue.newBuilder().setUint32Param(0).build())
                .putSettings("log_info", LogSettingsRequest.SettingValue.newBuilder().setBoolParam(false).build()).build());
        assertEquals(0, r.getSettingsOrThrow("log_verbose_level").getUint32Param());
        assertFalse(r.getSettingsOrThrow("log_info").getBoolParam());
        assertEquals("default", r.getSettingsOrThrow("log_format").getStringParam());
        assertEquals(new LogControl.Settings("", false, true, true, 0, "default"), logs.settings());

        HttpResponse<String> unknown = send("POST", e.base() + "/v2/logging", "{\"log_colour\":true}");
        assertEquals(400, unknown.statusCode(), unknown.body());
        assertTrue(unknown.body().contains("log_colour"), unknown.body());
        HttpResponse<String> wrongType = send("POST", e.base() + "/v2/logging", "{\"log_info\":\"yes\"}");
        assertEquals(400, wrongType.statusCode(), wrongType.body());
        assertTrue(wrongType.body().contains("log_info"), wrongType.body());
        StatusRuntimeException file = assertThrows(StatusRuntimeException.class, () -> e.grpc().logSettings(LogSettingsRequest.newBuilder()
                .putSettings("log_file", LogSettingsRequest.SettingValue.newBuilder().setStringParam("/var/log/x").build()).build()));
        assertEquals(Status.Code.UNIMPLEMENTED, file.getStatus().getCode());
        assertTrue(file.getStatus().getDescription().contains("/var/log/x"), file.getStatus().toString());
        assertEquals(new LogControl.Settings("", false, true, true, 0, "default"), logs.settings(), "refused updates change nothing");
        assertEquals(405, send("DELETE", e.base() + "/v2/logging", null).statusCode());
    }

    @Test
    void logging_hostWithoutControl_notListedAndUnsupported() throws Exception {
        Endpoints e = start(null);
        JsonNode v2 = JSON.readTree(send("GET", e.base() + "/v2", null).body());
        assertFalse(v2.get("extensions").toString().contains("logging"), v2.toString());
        assertFalse(e.grpc().serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList().contains("logging"));
        assertEquals(501, send("GET", e.base() + "/v2/logging", null).statusCode());
        StatusRuntimeException x = assertThrows(StatusRuntimeException.class, () -> e.grpc().logSettings(LogSettingsRequest.getDefaultInstance()));
        assertEquals(Status.Code.UNIMPLEMENTED, x.getStatus().getCode());
    }
}
