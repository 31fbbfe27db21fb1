package io.backplane.plugin.openai;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/** The frontend's JSON mapper and the reading of request bodies. */
final class Json {
    static final ObjectMapper MAPPER = JsonMapper.builder().disable(com.fasterxml.jackson.core.JsonGenerator.Feature.AUTO_CLOSE_TARGET).build();

    static {
        MAPPER.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(64).build());
    }

    private Json() {
    }

    /** The body as a JSON object; a body that is not one is a 400 naming why. */
    static JsonNode readObject(ByteBuf body) {
        if (!body.isReadable()) {
            throw ApiError.invalid("the request has no body; send a JSON object", null).failure();
        }
        JsonNode root;
        try {
            root = MAPPER.readTree(body.toString(StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
            throw ApiError.invalid("the body is not valid JSON: " + e.getOriginalMessage() + " (line " + e.getLocation().getLineNr()
                    + ", column " + e.getLocation().getColumnNr() + ")", null).failure();
        }
        if (root == null || !root.isObject()) {
            throw ApiError.invalid("the body must be a JSON object, not " + (root == null ? "nothing" : root.getNodeType().name().toLowerCase(java.util.Locale.ROOT)), null)
                    .failure();
        }
        return root;
    }

    static ByteBuf bytes(JsonNode node) {
        try {
            return Unpooled.wrappedBuffer(MAPPER.writeValueAsBytes(node));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
