package io.backplane.plugin.http;

import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;

/** Aggregates request bodies up to the limit; a larger body is answered 413 with a JSON error and the connection closed. */
final class LimitedAggregator extends HttpObjectAggregator {
    private final int limit;

    LimitedAggregator(int limit) {
        super(limit);
        this.limit = limit;
    }

    @Override
    protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
        String msg = "request body exceeds the limit of " + limit + " bytes (option max_body_bytes)";
        ctx.writeAndFlush(Responses.error(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, msg, false))
                .addListener(ChannelFutureListener.CLOSE);
    }
}
