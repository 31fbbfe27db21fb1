package io.backplane.plugin.http;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayDeque;
import java.util.Queue;

/**
 * Answers pipelined requests in order (RFC 9112 section 9.3.2): one request per connection is
 * handed to the {@link RestRouter} at a time; the next waits until the reply to the previous one
 * has been written to its end ({@code LastHttpContent}). While more than {@code maxQueued}
 * requests wait, the connection stops reading, so a pipelining client cannot queue without bound.
 * A {@link BadRequest} from {@link FramingGuard} is answered 400 in its turn, then the connection
 * closes. Runs on the connection's event loop only; one instance per connection.
 */
final class PipelineOrder extends ChannelDuplexHandler {
    /**
     * A request refused before it was read whole, to answer in order with {@code status} and close:
     * a framing failure (400), or a body over its limit (400) or over the memory budget (503). With
     * {@code drain} the connection half-closes after the answer and drops the rest of the upload
     * until the client closes or {@link LimitedAggregator#LINGER_SECONDS} pass, so a client still
     * sending reads the answer instead of a reset.
     */
    record BadRequest(HttpResponseStatus status, String message, boolean drain) {
        BadRequest(String message) {
            this(HttpResponseStatus.BAD_REQUEST, message, false);
        }
    }

    private final ConnectionGuard guard;
    private final int maxQueued;
    private final Queue<Object> waiting = new ArrayDeque<>();
    private boolean busy;
    private boolean closing;

    PipelineOrder(ConnectionGuard guard, int maxQueued) {
        this.guard = guard;
        this.maxQueued = maxQueued;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof FullHttpRequest) && !(msg instanceof BadRequest)) {
            ctx.fireChannelRead(msg);
            return;
        }
        if (closing) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (busy) {
            waiting.add(msg);
            if (waiting.size() >= maxQueued) {
                ctx.channel().config().setAutoRead(false);
            }
            return;
        }
        dispatch(ctx, msg);
    }

    private void dispatch(ChannelHandlerContext ctx, Object msg) {
        busy = true;
        if (msg instanceof BadRequest bad) {
            closing = true;
            var written = ctx.writeAndFlush(Responses.error(bad.status(), bad.message(), false));
            if (bad.drain()) {
                ctx.channel().config().setAutoRead(true);
                written.addListener(f -> LimitedAggregator.halfCloseAndLinger(ctx, f.isSuccess()));
            } else {
                written.addListener(ChannelFutureListener.CLOSE);
            }
            return;
        }
        guard.requestStarted();
        ctx.fireChannelRead(msg);
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        boolean last = msg instanceof LastHttpContent;
        ctx.write(msg, promise);
        if (!last || !busy || closing) {
            return;
        }
        guard.replied();
        Object next = waiting.poll();
        if (next == null) {
            busy = false;
        } else {
            // still busy: the next request goes out after this write returns, never beside it
            ctx.executor().execute(() -> {
                if (ctx.channel().isActive()) {
                    dispatch(ctx, next);
                } else {
                    ReferenceCountUtil.release(next);
                }
            });
        }
        if (waiting.size() < maxQueued && !guard.isBroken() && !ctx.channel().config().isAutoRead()) {
            ctx.channel().config().setAutoRead(true);
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        Object o;
        while ((o = waiting.poll()) != null) {
            ReferenceCountUtil.release(o);
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        Object o;
        while ((o = waiting.poll()) != null) {
            ReferenceCountUtil.release(o);
        }
    }
}
