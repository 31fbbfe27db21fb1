package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.RequestTracer;
import io.netty.handler.codec.http.HttpMethod;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Triton's trace extension: {@code GET|POST /v2/trace/setting} (server-wide, {@code call.model()}
 * is {@code ""}) and {@code /v2/models/<m>/trace/setting}. A POST sets the settings it names (a
 * string or a list of strings; null clears a model's own setting) and both answer them all, a
 * one-value setting as a string except {@code trace_level}, always a list. Starting and finishing
 * each request's trace is the {@link InferenceHandler}'s; this class only reads and changes the
 * {@link RequestTracer}'s settings. A tracer that serves no settings makes the extension 501
 * UNSUPPORTED.
 */
final class TraceHandler implements RestRoute {
    private final RequestTracer tracer;

    TraceHandler(RequestTracer tracer) {
        this.tracer = requireNonNull(tracer, "tracer is null");
    }

    @Override
    public void serve(RestCall call) {
        if (!tracer.serves()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host does not trace requests (trace extension)");
        }
        String model = call.model();
        Map<String, List<String>> now;
        if (call.method().equals(HttpMethod.POST)) {
            JsonNode root = InferCodec.readJson(call.request().content());
            if (!root.isObject()) {
                throw BackplaneException.invalid("the trace settings must be a JSON object, not " + root);
            }
            Map<String, @Nullable List<String>> changes = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : root.properties()) {
                JsonNode v = e.getValue();
                if (v.isNull()) {
                    changes.put(e.getKey(), null);
                } else if (v.isTextual()) {
                    changes.put(e.getKey(), List.of(v.textValue()));
                } else if (v.isArray()) {
                    List<String> values = new ArrayList<>();
                    for (JsonNode x : v) {
                        if (!x.isTextual()) {
                            throw BackplaneException.invalid("trace setting '" + e.getKey() + "' must be a string or a list of strings, not " + v);
                        }
                        values.add(x.textValue());
                    }
                    changes.put(e.getKey(), values);
                } else {
                    throw BackplaneException.invalid("trace setting '" + e.getKey() + "' must be a string or a list of strings, not " + v);
                }
            }
            now = tracer.update(model, changes);
        } else {
            call.requireMethod(HttpMethod.GET);
            now = tracer.settings(model);
        }
        Map<String, List<String>> s = now;
        call.sendJson(Json.write(g -> {
            g.writeStartObject();
            for (Map.Entry<String, List<String>> e : s.entrySet()) {
                if (e.getValue().size() == 1 && !e.getKey().equals("trace_level")) {
                    g.writeStringField(e.getKey(), e.getValue().get(0));
                } else {
                    g.writeArrayFieldStart(e.getKey());
                    for (String v : e.getValue()) {
                        g.writeString(v);
                    }
                    g.writeEndArray();
                }
            }
            g.writeEndObject();
        }));
    }
}
