package io.backplane.plugin.http;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.protocol.LogSettingsCodec;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.LogControl;
import io.netty.handler.codec.http.HttpMethod;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Triton's logging extension: {@code GET|POST /v2/logging}. A POST applies the settings it names
 * (merged onto the current ones by {@link LogSettingsCodec}, which owns their names and checks)
 * and both answer all settings. Without a {@link LogControl} from the host the extension is not
 * served: 501 UNSUPPORTED, and {@code GET /v2} does not list it.
 */
final class LoggingHandler implements RestRoute {
    private final @Nullable LogControl logs;

    LoggingHandler(@Nullable LogControl logs) {
        this.logs = logs;
    }

    @Override
    public void serve(RestCall call) {
        LogControl control = logs;
        if (call.segments().size() != 2) {
            throw call.notFound();
        }
        if (control == null) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "this host offers no run-time logging control (logging extension)");
        }
        LogControl.Settings now;
        if (call.method().equals(HttpMethod.POST)) {
            JsonNode root = InferCodec.readJson(call.request().content());
            if (!root.isObject()) {
                throw BackplaneException.invalid("the log settings must be a JSON object, not " + root);
            }
            Map<String, Object> changes = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : root.properties()) {
                JsonNode v = e.getValue();
                changes.put(e.getKey(), v.isTextual() ? v.textValue() : v.isBoolean() ? v.booleanValue() : v.canConvertToLong() && v.isIntegralNumber()
                        ? (Object) v.longValue() : v.toString());
            }
            now = control.update(LogSettingsCodec.merge(control.settings(), changes));
        } else {
            call.requireMethod(HttpMethod.GET);
            now = control.settings();
        }
        LogControl.Settings s = now;
        call.sendJson(Json.write(g -> {
            g.writeStartObject();
            for (Map.Entry<String, Object> e : LogSettingsCodec.toMap(s).entrySet()) {
                switch (e.getValue()) {
                    case Boolean b -> g.writeBooleanField(e.getKey(), b);
                    case Integer i -> g.writeNumberField(e.getKey(), i);
                    default -> g.writeStringField(e.getKey(), String.valueOf(e.getValue()));
                }
            }
            g.writeEndObject();
        }));
    }
}
