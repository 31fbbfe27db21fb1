package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.io.UncheckedIOException;

/** Shared, thread-safe Jackson objects, and the one way a handler writes a JSON body. */
final class Json {
    /**
     * The deepest nesting a request body may have: Triton's limit, which its QA checks (a tensor's
     * nested {@code data} arrays are one level per dimension, so this is far above any real shape).
     */
    static final int MAX_NESTING_DEPTH = 100;
    static final JsonFactory FACTORY = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxStringLength(Integer.MAX_VALUE).maxNestingDepth(MAX_NESTING_DEPTH).build())
            .build();
    static final ObjectMapper MAPPER = new ObjectMapper(FACTORY);

    private Json() {
    }

    /** A generator appending UTF-8 JSON to {@code buf}. */
    static JsonGenerator generator(ByteBuf buf) throws IOException {
        java.io.OutputStream out = new io.netty.buffer.ByteBufOutputStream(buf);
        return FACTORY.createGenerator(out);
    }

    /** Writes one JSON value to a generator. */
    @FunctionalInterface
    interface JsonWriter {
        void write(JsonGenerator g) throws IOException;
    }

    /** A fresh buffer holding what {@code w} writes; released if writing fails, whatever it throws. */
    static ByteBuf write(JsonWriter w) {
        ByteBuf buf = Unpooled.buffer(256);
        try (JsonGenerator g = generator(buf)) {
            w.write(g);
        } catch (IOException e) {
            buf.release();
            throw new UncheckedIOException(e);
        } catch (RuntimeException | Error e) {
            buf.release();
            throw e;
        }
        return buf;
    }
}
