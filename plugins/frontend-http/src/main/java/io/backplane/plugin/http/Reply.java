package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.FullHttpResponse;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One request's single reply (DESIGN L1 at the edge): whichever of {@link #send},
 * {@link #sendClosing} or {@link #finishStream} comes first wins by compare-and-set, a second is
 * dropped (its buffer released) and never reaches the client. The reply counts as open in its
 * {@link OpenReplies} from construction until it is written, so a close that stops the event
 * loops next cannot drop it unwritten. Thread-safe: handlers answer from whatever thread ends the
 * request.
 */
final class Reply {
    private static final Logger log = LoggerFactory.getLogger(Reply.class);
    final ChannelHandlerContext ctx;
    final boolean keepAlive;
    private final OpenReplies owner;
    private final AtomicBoolean done = new AtomicBoolean();
    /** Set once an event stream's head was written: the reply can then only be ended, not answered. */
    volatile boolean streaming;

    Reply(ChannelHandlerContext ctx, boolean keepAlive, OpenReplies owner) {
        this.ctx = requireNonNull(ctx, "ctx is null");
        this.keepAlive = keepAlive;
        this.owner = requireNonNull(owner, "owner is null");
        owner.opened(this);
    }

    void send(FullHttpResponse response) {
        if (!done.compareAndSet(false, true)) {
            response.release();
            log.debug("second reply to one HTTP request dropped");
            return;
        }
        ChannelFuture f = ctx.writeAndFlush(response);
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
        // open until written: a close that stops the event loops next must not drop it unwritten
        f.addListener(x -> owner.ended(this));
    }

    /** Sends {@code response} and closes the connection, unless a reply was already sent. */
    boolean sendClosing(FullHttpResponse response) {
        if (!done.compareAndSet(false, true)) {
            response.release();
            return false;
        }
        ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE).addListener(x -> owner.ended(this));
        return true;
    }

    void fail(Throwable t) {
        send(RestErrors.errorResponse(t, keepAlive));
    }

    /** Marks the reply done without a full response (an event stream ended). */
    boolean finishStream() {
        if (done.compareAndSet(false, true)) {
            owner.ended(this);
            return true;
        }
        return false;
    }
}
