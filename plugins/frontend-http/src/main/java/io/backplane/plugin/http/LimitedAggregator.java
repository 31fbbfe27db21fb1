package io.backplane.plugin.http;

import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.channel.socket.DuplexChannel;
import java.util.concurrent.TimeUnit;

/**
 * Aggregates request bodies up to the limit; a larger body is answered 400 (as Triton answers it) with a JSON error and the
 * connection closed. The close is a half-close first: the client still uploading would otherwise get
 * a reset that can destroy the 400 before it reads it, so the server stops writing (the client sees
 * the whole answer, then end of stream), goes on reading and dropping the rest of the upload, and
 * closes for good when the client does or after {@link #LINGER_SECONDS}.
 */
final class LimitedAggregator extends HttpObjectAggregator {
    static final int LINGER_SECONDS = 5;

    private final int limit;

    LimitedAggregator(int limit) {
        super(limit);
        this.limit = limit;
    }

    @Override
    protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
        String msg = "request body exceeds the maximum allowed value of " + limit + " bytes (options max_body_bytes, max_binary_body_bytes)";
        ctx.writeAndFlush(Responses.error(HttpResponseStatus.BAD_REQUEST, msg, false))
                .addListener(f -> halfCloseAndLinger(ctx, f.isSuccess()));
    }

    /** After a refusal was written: stop writing, keep reading (and dropping) until the client closes or the linger passes. */
    static void halfCloseAndLinger(ChannelHandlerContext ctx, boolean written) {
        if (written && ctx.channel() instanceof DuplexChannel d && d.isActive()) {
            d.shutdownOutput();
            ctx.executor().schedule(() -> ctx.close(), LINGER_SECONDS, TimeUnit.SECONDS);
        } else {
            ctx.close();
        }
    }
}
