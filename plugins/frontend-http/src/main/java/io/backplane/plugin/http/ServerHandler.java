package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.backplane.protocol.Extensions;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.LogControl;
import io.backplane.spi.host.RequestTracer;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import org.jspecify.annotations.Nullable;

/**
 * {@code GET /v2} (server metadata) and {@code GET /v2/health/{live,ready}}. Owns what the
 * server reports of itself: its name (the host's {@code serverName()}), the extensions listed are exactly {@link Extensions#served} for what
 * this host offers, as the gRPC frontend reports them; the probes answer the host's own liveness
 * and readiness (200, or 503), so Kubernetes sees real model state, with the Open Inference Protocol's
 * JSON bodies {@code {"live": true}} and {@code {"ready": true}} ({@code false} with the 503), which
 * KServe's {@code InferenceRESTClient} parses; Triton's clients read only the status. Option
 * {@code health_body=empty} answers the status alone, as Triton does, for scripts that compare the
 * whole answer (Triton's QA {@code util.sh}: {@code curl -s -w %{http_code}}).
 */
final class ServerHandler implements RestRoute {
    private final InferenceService service;
    private final boolean logging;
    private final RequestTracer tracer;

    private final boolean cudaSharedMemory;
    private final boolean healthJson;

    ServerHandler(InferenceService service, @Nullable LogControl logs, RequestTracer tracer, boolean cudaSharedMemory, boolean healthJson) {
        this.cudaSharedMemory = cudaSharedMemory;
        this.healthJson = healthJson;
        this.service = requireNonNull(service, "service is null");
        this.logging = logs != null;
        this.tracer = requireNonNull(tracer, "tracer is null");
    }

    @Override
    public void serve(RestCall call) {
        if (call.segments().size() == 1) {
            call.requireMethod(HttpMethod.GET);
            call.sendJson(Json.write(g -> {
                g.writeStartObject();
                g.writeStringField("name", service.serverName());
                g.writeStringField("version", service.version());
                g.writeArrayFieldStart("extensions");
                for (String e : Extensions.served(logging, tracer.serves(), cudaSharedMemory)) {
                    g.writeString(e);
                }
                g.writeEndArray();
                g.writeEndObject();
            }));
            return;
        }
        var seg = call.segments();
        if (seg.size() != 3 || !(seg.get(2).equals("live") || seg.get(2).equals("ready"))) {
            throw call.notFound();
        }
        call.requireMethod(HttpMethod.GET);
        if (seg.get(2).equals("live")) {
            probe(call, "live", service.isLive(), healthJson);
            return;
        }
        // The host's answer, which may wait for instances' readiness checks: answered when it comes, off the event loop.
        service.checkReady().whenComplete((ok, e) -> probe(call, "ready", e == null && Boolean.TRUE.equals(ok), healthJson));
    }

    /** 200 {@code {"<field>": true}} or 503 {@code {"<field>": false}}; with {@code json} false, the status alone (Triton's answer). */
    static void probe(RestCall call, String field, boolean yes, boolean json) {
        HttpResponseStatus status = yes ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE;
        if (!json) {
            call.sendEmpty(status);
            return;
        }
        call.sendJson(status, Json.write(g -> {
            g.writeStartObject();
            g.writeBooleanField(field, yes);
            g.writeEndObject();
        }));
    }
}
