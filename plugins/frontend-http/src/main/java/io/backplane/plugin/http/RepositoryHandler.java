package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.LoadParameters;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.LoadOverride;
import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufInputStream;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;

/**
 * Triton's model repository extension: {@code POST /v2/repository/index} and
 * {@code POST /v2/repository/models/<m>/{load,unload}}. Owns that a load or unload never blocks an
 * event loop: it runs on the frontend's admin executor and answers from there (a refused
 * submission, once the frontend is closing, is 503). Load parameters are Triton's ({@code config},
 * {@code file:<path>}, as {@link LoadParameters} reads them); unload takes Triton's
 * {@code unload_dependents}.
 */
final class RepositoryHandler implements RestRoute {
    private final InferenceService service;
    private final ExecutorService admin;

    RepositoryHandler(InferenceService service, ExecutorService admin) {
        this.service = requireNonNull(service, "service is null");
        this.admin = requireNonNull(admin, "admin is null");
    }

    @Override
    public void serve(RestCall call) {
        List<String> seg = call.segments();
        int n = seg.size();
        var req = call.request();
        Reply reply = call.reply();
        call.requireMethod(HttpMethod.POST);
        if (n == 3 && seg.get(2).equals("index")) {
            boolean readyOnly = false;
            if (req.content().readableBytes() > 0) {
                readyOnly = readyOnly(req.content());
            }
            call.sendJson(index(service.repositoryIndex(), readyOnly));
            return;
        }
        if (n == 5 && seg.get(2).equals("models") && (seg.get(4).equals("load") || seg.get(4).equals("unload"))) {
            String model = seg.get(3);
            boolean load = seg.get(4).equals("load");
            LoadOverride override = LoadOverride.NONE;
            boolean dependents = false;
            if (req.content().readableBytes() > 0) {
                JsonNode root = InferCodec.readJson(req.content());
                JsonNode p = root.get("parameters");
                if (p != null && p.size() > 0) {
                    if (load) {
                        override = loadOverride(model, p);
                    } else {
                        dependents = unloadDependents(model, p);
                    }
                }
            }
            LoadOverride o = override;
            boolean d = dependents;
            try {
                admin.execute(() -> {
                    try {
                        if (load) {
                            service.load(model, o);
                        } else {
                            service.unload(model, d);
                        }
                        reply.send(Responses.empty(HttpResponseStatus.OK, reply.keepAlive));
                    } catch (Throwable t) {
                        reply.fail(t);
                    }
                });
            } catch (RejectedExecutionException e) {
                throw BackplaneException.unavailable("the http frontend is shutting down");
            }
            return;
        }
        throw call.notFound();
    }

    /**
     * The index request's {@code ready} flag, read as a stream: a value that is not a boolean is
     * refused from its first token (Triton's words), so a deeply nested one is never descended.
     */
    static boolean readyOnly(ByteBuf body) {
        boolean ready = false;
        try (JsonParser p = Json.FACTORY.createParser((InputStream) new ByteBufInputStream(body.duplicate()))) {
            JsonToken t = p.nextToken();
            if (t == null) {
                return false;
            }
            if (t != JsonToken.START_OBJECT) {
                throw BackplaneException.invalid("the repository index request must be a JSON object, not " + t.asString());
            }
            while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                t = p.nextToken();
                if (field.equals("ready")) {
                    if (!t.isBoolean()) {
                        throw BackplaneException.invalid("Invalid value for 'ready': expected a boolean (true or false), not "
                                + (t.isStructStart() ? "a JSON " + (t == JsonToken.START_ARRAY ? "array" : "object") : p.getText()));
                    }
                    ready = p.getBooleanValue();
                } else {
                    p.skipChildren();
                }
            }
            return ready;
        } catch (StreamConstraintsException e) {
            throw InferCodec.constraint(e);
        } catch (JsonProcessingException e) {
            throw BackplaneException.invalid("malformed JSON in the request body: " + e.getOriginalMessage());
        } catch (IOException e) {
            throw BackplaneException.invalid("unreadable request body: " + e.getMessage());
        }
    }

    /** The parameter of Triton's unload. */
    static final String UNLOAD_DEPENDENTS = "unload_dependents";

    /** Triton's unload parameter {@code unload_dependents} (a JSON boolean); any other key is UNSUPPORTED (501), naming it. */
    private static boolean unloadDependents(String model, JsonNode parameters) {
        if (!parameters.isObject()) {
            throw BackplaneException.invalid("'parameters' of an unload must be an object, not " + parameters);
        }
        boolean dependents = false;
        for (var it = parameters.properties().iterator(); it.hasNext();) {
            var e = it.next();
            if (!e.getKey().equals(UNLOAD_DEPENDENTS)) {
                throw new BackplaneException(ErrorCode.UNSUPPORTED, "unload parameter '" + e.getKey() + "' of model '" + model
                        + "' is not supported; an unload takes '" + UNLOAD_DEPENDENTS + "' (true or false)");
            }
            if (!e.getValue().isBoolean()) {
                throw BackplaneException.invalid("Unable to parse '" + UNLOAD_DEPENDENTS + "': expected true or false, not " + e.getValue());
            }
            dependents = e.getValue().booleanValue();
        }
        return dependents;
    }

    /** Triton's load parameters: {@code config} (a JSON string) and {@code file:<path>} (base64 strings). */
    private static LoadOverride loadOverride(String model, JsonNode parameters) {
        if (!parameters.isObject()) {
            throw BackplaneException.invalid("'parameters' of a load must be an object, not " + parameters);
        }
        LoadParameters lp = LoadParameters.of(model);
        for (var it = parameters.properties().iterator(); it.hasNext();) {
            var e = it.next();
            if (!e.getValue().isTextual()) {
                throw lp.wrongType(e.getKey(), e.getValue().getNodeType().toString().toLowerCase(Locale.ROOT));
            }
            lp.text(e.getKey(), e.getValue().textValue());
        }
        return lp.override();
    }

    private static ByteBuf index(List<ModelStatus> index, boolean readyOnly) {
        return Json.write(g -> {
            g.writeStartArray();
            for (ModelStatus s : index) {
                if (readyOnly && s.state() != ModelState.READY) {
                    continue;
                }
                g.writeStartObject();
                g.writeStringField("name", s.name());
                if (s.version() > 0) {
                    g.writeStringField("version", Long.toString(s.version()));
                }
                g.writeStringField("state", s.state().name());
                g.writeStringField("reason", s.reason() == null ? "" : s.reason());
                g.writeEndObject();
            }
            g.writeEndArray();
        });
    }
}
