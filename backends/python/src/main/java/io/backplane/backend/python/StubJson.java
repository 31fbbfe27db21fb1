package io.backplane.backend.python;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.spi.BackplaneException;
import java.util.LinkedHashMap;
import java.util.Map;

/** The JSON the stub sends: response parameters and auto-completed model configs. */
final class StubJson {
    static final ObjectMapper MAPPER = new ObjectMapper();

    private StubJson() {
    }

    /**
     * Response parameters ({@code InferenceResponse(parameters=...)}, a JSON object) as the SPI's
     * map: strings, whole numbers (Long), other numbers (Double) and booleans.
     */
    static Map<String, Object> parameters(String json) {
        if (json.isEmpty() || json.equals("{}")) {
            return Map.of();
        }
        JsonNode root = parse(json, "response parameters");
        if (!(root instanceof ObjectNode o)) {
            throw Wire.protocol("response parameters are not a JSON object: " + abbreviate(json));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : o.properties()) {
            JsonNode v = e.getValue();
            if (v.isTextual()) {
                out.put(e.getKey(), v.textValue());
            } else if (v.isBoolean()) {
                out.put(e.getKey(), v.booleanValue());
            } else if (v.isIntegralNumber() && v.canConvertToLong()) {
                out.put(e.getKey(), v.longValue());
            } else if (v.isNumber()) {
                out.put(e.getKey(), v.doubleValue());
            } else {
                throw Wire.protocol("response parameter '" + e.getKey() + "' is " + v.getNodeType() + "; use str, int, float or bool");
            }
        }
        return out;
    }

    static JsonNode parse(String json, String what) {
        try {
            return MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw new BackplaneException(io.backplane.spi.ErrorCode.INTERNAL, what + " from the python stub are not valid JSON: "
                    + e.getOriginalMessage() + ": " + abbreviate(json), e);
        }
    }

    private static String abbreviate(String s) {
        return s.length() <= 200 ? s : s.substring(0, 200) + "…";
    }
}
