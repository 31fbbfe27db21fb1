package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonGenerator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.io.IOException;
import java.io.UncheckedIOException;

/** Builds full HTTP responses. */
final class Responses {
    private Responses() {
    }

    static FullHttpResponse json(HttpResponseStatus status, ByteBuf body, boolean keepAlive) {
        return full(status, body, HttpHeaderValues.APPLICATION_JSON, keepAlive);
    }

    static FullHttpResponse full(HttpResponseStatus status, ByteBuf body, CharSequence contentType, boolean keepAlive) {
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, body);
        r.headers().set(HttpHeaderNames.CONTENT_LENGTH, body.readableBytes());
        if (body.readableBytes() > 0) {
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
        }
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        return r;
    }

    static FullHttpResponse empty(HttpResponseStatus status, boolean keepAlive) {
        return full(status, Unpooled.EMPTY_BUFFER, HttpHeaderValues.APPLICATION_JSON, keepAlive);
    }

    /** {@code {"error": "..."}} with the given status. */
    static FullHttpResponse error(HttpResponseStatus status, String message, boolean keepAlive) {
        return json(status, errorBody(message), keepAlive);
    }

    static ByteBuf errorBody(String message) {
        ByteBuf buf = Unpooled.buffer(message.length() + 16);
        try (JsonGenerator g = Json.generator(buf)) {
            g.writeStartObject();
            g.writeStringField("error", message);
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return buf;
    }
}
