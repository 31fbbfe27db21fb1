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
 * KServe's {@code InferenceRESTClient} parses; Triton's clients read only the status.
 */
final class ServerHandler implements RestRoute {
    private final InferenceService service;
    private final boolean logging;
    private final RequestTracer tracer;

    private final boolean cudaSharedMemory;

    ServerHandler(InferenceService service, @Nullable LogControl logs, RequestTracer tracer, boolean cudaSharedMemory) {
        this.cudaSharedMemory = cudaSharedMemory;
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
            probe(call, "live", service.isLive());
            return;
        }
        // The host's answer, which may wait for instances' readiness checks: answered when it comes, off the event loop.
        service.checkReady().whenComplete((ok, e) -> probe(call, "ready", e == null && Boolean.TRUE.equals(ok)));
    }

    /** 200 {@code {"<field>": true}} or 503 {@code {"<field>": false}}. */
    static void probe(RestCall call, String field, boolean yes) {
        call.sendJson(yes ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE, Json.write(g -> {
            g.writeStartObject();
            g.writeBooleanField(field, yes);
            g.writeEndObject();
        }));
    }
}
