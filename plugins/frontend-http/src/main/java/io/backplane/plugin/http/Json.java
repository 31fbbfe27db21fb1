package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.ObjectMapper;

/** Shared, thread-safe Jackson objects. */
final class Json {
    static final JsonFactory FACTORY = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxStringLength(Integer.MAX_VALUE).build()).build();
    static final ObjectMapper MAPPER = new ObjectMapper(FACTORY);

    private Json() {
    }

    /** A generator appending UTF-8 JSON to {@code buf}. */
    static com.fasterxml.jackson.core.JsonGenerator generator(io.netty.buffer.ByteBuf buf) throws java.io.IOException {
        java.io.OutputStream out = new io.netty.buffer.ByteBufOutputStream(buf);
        return FACTORY.createGenerator(out);
    }
}
