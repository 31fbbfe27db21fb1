package io.backplane.plugin.http;

import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpRequestDecoder;

/**
 * Netty's request decoder, except that a message with both {@code Content-Length} and
 * {@code Transfer-Encoding} is a decoding failure (RFC 9112 section 6.3 allows a server to reject
 * it, and must then close), where Netty would drop the length and read the body as chunked: a
 * front proxy that reads the length instead would see a different request boundary (smuggling).
 * The failed message reaches {@link FramingGuard}, which answers 400 and closes.
 */
final class StrictRequestDecoder extends HttpRequestDecoder {
    StrictRequestDecoder(int maxHeaderBytes) {
        super(new HttpDecoderConfig().setMaxHeaderSize(maxHeaderBytes).setStrictLineParsing(true));
    }

    @Override
    protected void handleTransferEncodingChunkedWithContentLength(HttpMessage message) {
        throw new IllegalArgumentException("the request has both Content-Length and Transfer-Encoding; send one of them");
    }
}
