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
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ServerMetadataRequest;
import io.backplane.protocol.inference.TraceSettingRequest;
import io.backplane.protocol.inference.TraceSettingResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.RequestTrace;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.RequestTracer;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The trace extension through both real frontends, over a host's {@link RequestTracer} that
 * records what it is told: the W3C traceparent in (REST header, gRPC metadata), the core's queue
 * and compute timings and the frontend's finish out, and the settings endpoints.
 */
class TraceExtensionTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /** One traced request as the tracer saw it. */
    static final class Recorded implements RequestTrace {
        final String model;
        final @Nullable String traceParent;
        final List<String> events = new CopyOnWriteArrayList<>();

        Recorded(String model, @Nullable String traceParent) {
            this.model = model;
            this.traceParent = traceParent;
        }

        @Override
        public void timings(String model, long version, long queueNanos, long computeNanos, boolean ok) {
            events.add("timings " + model + " v" + version + " ok=" + ok);
        }

        @Override
        public void finish(@Nullable Throwable error) {
            events.add("finish " + (error == null ? "ok" : "error"));
        }
    }

    /** A host's tracer that traces everything and keeps its settings in a map. */
    static final class Recorder implements RequestTracer {
        final List<Recorded> traces = new CopyOnWriteArrayList<>();
        final Map<String, List<String>> global = new LinkedHashMap<>(Map.of("trace_level", List.of("TIMESTAMPS"), "trace_rate", List.of("1")));
        final Map<String, Map<String, List<String>>> models = new LinkedHashMap<>();

        @Override
        public RequestTrace start(String model, @Nullable String traceParent) {
            Recorded r = new Recorded(model, traceParent);
            traces.add(r);
            return r;
        }

        @Override
        public synchronized Map<String, List<String>> settings(String model) {
            Map<String, List<String>> out = new LinkedHashMap<>(global);
            out.putAll(models.getOrDefault(model, Map.of()));
            return out;
        }

        @Override
        public synchronized Map<String, List<String>> update(String model, Map<String, @Nullable List<String>> changes) {
            if (changes.containsKey("trace_colour")) {
                throw BackplaneException.invalid("unknown trace setting 'trace_colour'");
            }
            Map<String, List<String>> target = model.isEmpty() ? global : models.computeIfAbsent(model, m -> new LinkedHashMap<>());
            changes.forEach((k, v) -> {
                if (v == null) {
                    target.remove(k);
                } else {
                    target.put(k, v);
                }
            });
            return settings(model);
        }
    }

    BackplaneHost host;
    final List<AutoCloseable> open = new ArrayList<>();
    final HttpClient rest = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

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

    record Endpoints(String base, GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc) {
    }

    Endpoints start(RequestTracer tracer) throws Exception {
        host = BackplaneHost.builder().backend(new TestBackend()).model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build();
        Map<String, String> options = Map.of("host", "127.0.0.1", "port", "0");
        FrontendContext ctx = new FrontendContext() {
            @Override
            public InferenceService service() {
                return host;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }

            @Override
            public RequestTracer tracer() {
                return tracer;
            }
        };
        Frontend http = new HttpFrontendFactory().create(ctx);
        open.add(http);
        http.start();
        GrpcFrontend grpc = (GrpcFrontend) new GrpcFrontendFactory().create(ctx);
        open.add(grpc);
        grpc.start();
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpc.port(), InsecureChannelCredentials.create()).build();
        open.add(() -> channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS));
        return new Endpoints("http://" + http.endpoint().replaceFirst("^[a-z]+://", ""),
                GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS));
    }

    HttpResponse<String> send(String method, String url, @Nullable String body, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(20))
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        for (int i = 0; i < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return rest.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void trace_traceparentInOverRestAndGrpc_timingsAndFinishOut_settingsServed() throws Exception {
        Recorder tracer = new Recorder();
        Endpoints e = start(tracer);
        assertTrue(JSON.readTree(send("GET", e.base() + "/v2", null).body()).get("extensions").toString().contains("\"trace\""));
        assertTrue(e.grpc().serverMetadata(ServerMetadataRequest.getDefaultInstance()).getExtensionsList().contains("trace"));

        HttpResponse<String> r = send("POST", e.base() + "/v2/models/identity/infer",
                "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", "traceparent", TP);
        assertEquals(200, r.statusCode(), r.body());
        Recorded viaRest = tracer.traces.getFirst();
        assertEquals(TP, viaRest.traceParent);
        assertEquals("identity", viaRest.model);
        assertEquals(List.of("timings identity v1 ok=true", "finish ok"), viaRest.events);

        Metadata md = new Metadata();
        md.put(Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER), TP);
        e.grpc().withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md)).modelInfer(GrpcFrontendTest.fp32("identity", 2f));
        Recorded viaGrpc = tracer.traces.get(1);
        assertEquals(TP, viaGrpc.traceParent);
        assertTrue(viaGrpc.events.contains("finish ok"), viaGrpc.events.toString());
        assertTrue(viaGrpc.events.contains("timings identity v1 ok=true"), viaGrpc.events.toString());

        // Settings: global and per model, REST and gRPC.
        JsonNode global = JSON.readTree(send("GET", e.base() + "/v2/trace/setting", null).body());
        assertEquals("[\"TIMESTAMPS\"]", global.get("trace_level").toString());
        assertEquals("1", global.get("trace_rate").asText());
        HttpResponse<String> set = send("POST", e.base() + "/v2/models/identity/trace/setting", "{\"trace_rate\":\"5\"}");
        assertEquals(200, set.statusCode(), set.body());
        assertEquals("5", JSON.readTree(set.body()).get("trace_rate").asText());
        TraceSettingResponse viaGrpcSettings = e.grpc().traceSetting(TraceSettingRequest.newBuilder().setModelName("identity").build());
        assertEquals(List.of("5"), viaGrpcSettings.getSettingsOrThrow("trace_rate").getValueList());
        TraceSettingResponse cleared = e.grpc().traceSetting(TraceSettingRequest.newBuilder().setModelName("identity")
                .putSettings("trace_rate", TraceSettingRequest.SettingValue.getDefaultInstance()).build());
        assertEquals(List.of("1"), cleared.getSettingsOrThrow("trace_rate").getValueList(), "an empty value clears the model's own setting");
        HttpResponse<String> bad = send("POST", e.base() + "/v2/trace/setting", "{\"trace_colour\":\"red\"}");
        assertEquals(400, bad.statusCode(), bad.body());
        assertTrue(bad.body().contains("trace_colour"), bad.body());
        HttpResponse<String> badType = send("POST", e.base() + "/v2/trace/setting", "{\"trace_rate\":5}");
        assertEquals(400, badType.statusCode(), badType.body());
    }

    @Test
    void trace_hostWithoutTracer_notListedAndUnsupported() throws Exception {
        Endpoints e = start(RequestTracer.NONE);
        assertFalse(JSON.readTree(send("GET", e.base() + "/v2", null).body()).get("extensions").toString().contains("\"trace\""));
        assertEquals(501, send("GET", e.base() + "/v2/trace/setting", null).statusCode());
        assertEquals(501, send("GET", e.base() + "/v2/models/identity/trace/setting", null).statusCode());
        StatusRuntimeException x = assertThrows(StatusRuntimeException.class, () -> e.grpc().traceSetting(TraceSettingRequest.getDefaultInstance()));
        assertEquals(Status.Code.UNIMPLEMENTED, x.getStatus().getCode());
        assertEquals(200, send("POST", e.base() + "/v2/models/identity/infer",
                "{\"inputs\":[{\"name\":\"IN0\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", "traceparent", TP).statusCode());
    }
}
