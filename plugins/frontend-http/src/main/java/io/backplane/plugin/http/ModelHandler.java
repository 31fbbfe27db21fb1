package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonGenerator;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelMetadata;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.IOException;
import java.util.List;

/**
 * {@code GET /v2/models/<m>[/versions/<v>]}, {@code .../ready} and {@code .../config}: what a
 * client reads about one model. Owns the readiness answer's three cases, each the host's own
 * answer ({@code checkModelReady}, off the event loop): 200 ready, with {@code {"name": …, "ready": true}}
 * as KServe's servers answer; 404 when the repository does not
 * know the model; 503 naming the version when it is known but not ready, in Triton's words) and
 * the metadata's {@code platform} (the config's platform, else the backend's name).
 */
final class ModelHandler implements RestRoute {
    private final InferenceService service;

    private final boolean readyJson;

    ModelHandler(InferenceService service, boolean readyJson) {
        this.service = requireNonNull(service, "service is null");
        this.readyJson = readyJson;
    }

    @Override
    public void serve(RestCall call) {
        String model = call.model();
        long version = call.version();
        call.requireMethod(HttpMethod.GET);
        switch (call.action()) {
            case "ready" -> service.checkModelReady(model, version).whenComplete((ready, e) -> {
                try {
                    if (e == null && Boolean.TRUE.equals(ready) && !readyJson) {
                        call.sendEmpty(HttpResponseStatus.OK); // option health_body=empty: Triton's answer
                    } else if (e == null && Boolean.TRUE.equals(ready)) {
                        // KServe's servers answer this body; Triton's clients read only the status.
                        call.sendJson(Json.write(g -> {
                            g.writeStartObject();
                            g.writeStringField("name", model);
                            g.writeBooleanField("ready", true);
                            g.writeEndObject();
                        }));
                    } else {
                        call.reply().fail(notReady(model, version));
                    }
                } catch (Throwable t) {
                    call.reply().fail(t);
                }
            });
            case "config" -> call.sendJson(ConfigJson.write(service.modelConfig(model, version)));
            case "" -> call.sendJson(metadata(service.metadata(model, version)));
            default -> throw call.notFound();
        }
    }

    /** Why {@code model} is not ready, in Triton's words first (its core's answer to a request for it). */
    private BackplaneException notReady(String model, long version) {
        if (service.repositoryIndex().stream().noneMatch(s -> s.name().equals(model))) {
            return BackplaneException.notFound("Request for unknown model: '" + model + "' is not found; the model repository has no such model");
        }
        return BackplaneException.unavailable(version == InferenceRequest.LATEST
                ? "Request for unknown model: '" + model + "' has no available versions; no version of it can serve now"
                : "Request for unknown model: '" + model + "' version " + version + " is not at ready state; it is not loaded or cannot serve now");
    }

    private static ByteBuf metadata(ModelMetadata md) {
        return Json.write(g -> {
            g.writeStartObject();
            g.writeStringField("name", md.name());
            g.writeArrayFieldStart("versions");
            for (long v : md.versions()) {
                g.writeString(Long.toString(v));
            }
            g.writeEndArray();
            g.writeStringField("platform", md.platform().isEmpty() ? md.backend() : md.platform());
            tensors(g, "inputs", md.inputs());
            tensors(g, "outputs", md.outputs());
            g.writeEndObject();
        });
    }

    private static void tensors(JsonGenerator g, String field, List<ModelMetadata.TensorMetadata> ts) throws IOException {
        g.writeArrayFieldStart(field);
        for (ModelMetadata.TensorMetadata t : ts) {
            g.writeStartObject();
            g.writeStringField("name", t.name());
            g.writeStringField("datatype", t.datatype().protocolName());
            g.writeArrayFieldStart("shape");
            for (long d : t.shape()) {
                g.writeNumber(d);
            }
            g.writeEndArray();
            g.writeEndObject();
        }
        g.writeEndArray();
    }
}
