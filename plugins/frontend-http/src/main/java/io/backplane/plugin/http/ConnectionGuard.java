package io.backplane.plugin.http;

import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.ReferenceCountUtil;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Connection hygiene for one REST connection: the first handler of its pipeline, it sees raw
 * bytes, and {@link FramingGuard} and {@link PipelineOrder} tell it where each request stands.
 *
 * <p>Phases and their timers: <b>idle</b> (no request under way: closed after
 * {@code idle_timeout_ms}); <b>headers</b> (bytes of a request arrived, its headers not yet
 * complete: answered 408 and closed after {@code header_timeout_ms}, which ends slowloris
 * connections); <b>body</b> (headers read, body not yet complete: 408 and close after
 * {@code body_timeout_ms}); <b>busy</b> (a request is being served: no timer, the host's own
 * deadlines apply). All of it runs on the connection's event loop.
 *
 * <p>The {@link Limiter} bounds the connections of one frontend: above {@code max_connections},
 * a new connection evicts an idle connection (or one stuck in its headers): one that was never
 * answered first, then the one idle the longest. So a flood of idle connections cannot lock out
 * a client that sends requests, nor take its pooled keep-alive connection from it; when every
 * connection is busy the new one is refused.
 *
 * <p>An evicted or refused connection is never just dropped: a keep-alive client may have sent
 * its next request already, and a bare close would lose it without a status. The connection
 * gets a 503 with {@code Connection: close}, then a half-close: the server stops writing, reads
 * and discards what the client still sends (so the kernel does not answer it with a reset that
 * could destroy the 503 before the client reads it), and closes when the client does or after
 * {@link #DRAIN_MILLIS}. (Over TLS the connection is closed at once: a 503 would need the
 * handshake first.)
 */
final class ConnectionGuard extends ChannelInboundHandlerAdapter {
    private static final Logger log = LoggerFactory.getLogger(ConnectionGuard.class);

    private enum Phase { IDLE, HEADERS, BODY, BUSY }

    /** How long a rejected connection is drained before the server closes it anyway. */
    static final long DRAIN_MILLIS = 2_000;

    /** The connections of one frontend, bounded. Thread-safe. */
    static final class Limiter {
        private final int max;
        private final AtomicInteger count = new AtomicInteger();
        private final Set<ConnectionGuard> open = ConcurrentHashMap.newKeySet();
        private final AtomicInteger evicted = new AtomicInteger();
        private final AtomicInteger refused = new AtomicInteger();

        Limiter(int max) {
            this.max = max;
        }

        boolean admit(ConnectionGuard g) {
            open.add(g);
            if (count.incrementAndGet() <= max) {
                return true;
            }
            // event loops admit concurrently: a victim another loop took first is skipped, and the scan repeats
            while (true) {
                ConnectionGuard victim = null;
                for (ConnectionGuard c : open) {
                    if (c != g && c.evictable() && (victim == null || c.evictsBefore(victim))) {
                        victim = c;
                    }
                }
                if (victim == null) {
                    refused.incrementAndGet();
                    return false;
                }
                if (victim.evict()) {
                    evicted.incrementAndGet();
                    return true;
                }
            }
        }

        void release(ConnectionGuard g) {
            if (open.remove(g)) {
                count.decrementAndGet();
            }
        }

        int open() {
            return count.get();
        }

        int evicted() {
            return evicted.get();
        }

        int refused() {
            return refused.get();
        }
    }

    private final Limiter limiter;
    private final FrontendOptions options;
    private volatile Phase phase = Phase.IDLE;
    private volatile long lastActivity = System.nanoTime();
    /** A reply was written on this connection: it belongs to a working client. */
    private volatile boolean served;
    private final AtomicBoolean evicting = new AtomicBoolean();
    private volatile @Nullable ChannelHandlerContext ctx;
    private @Nullable Future<?> timer;
    private boolean partial;
    private boolean broken;
    private boolean draining;

    ConnectionGuard(Limiter limiter, FrontendOptions options) {
        this.limiter = limiter;
        this.options = options;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        if (!limiter.admit(this)) {
            log.debug("http connection from {} refused: {} connections open (option max_connections) and none idle",
                    ctx.channel().remoteAddress(), options.maxConnections());
            reject("the server is at its limit of " + options.maxConnections()
                    + " connections (option max_connections) and every one is busy; retry, or raise max_connections");
            return;
        }
        enter(Phase.IDLE);
        ctx.fireChannelActive();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        cancelTimer();
        limiter.release(this);
        ctx.fireChannelInactive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (draining) {
            ReferenceCountUtil.release(msg);
            return;
        }
        lastActivity = System.nanoTime();
        if (phase == Phase.IDLE) {
            enter(Phase.HEADERS);
        }
        ctx.fireChannelRead(msg);
    }

    /**
     * Whether this connection is a better victim than {@code other}: one that never got an answer
     * (a flood's idle or slowloris connection) before one that did (a client's pooled keep-alive
     * connection, which would take the 503 as the answer to its next request), then the one idle
     * the longest.
     */
    private boolean evictsBefore(ConnectionGuard other) {
        if (served != other.served) {
            return !served;
        }
        return lastActivity < other.lastActivity;
    }

    boolean evictable() {
        Phase p = phase;
        return !evicting.get() && (p == Phase.IDLE || p == Phase.HEADERS);
    }

    private boolean evict() {
        ChannelHandlerContext c = ctx;
        if (!evicting.compareAndSet(false, true)) {
            return false;
        }
        if (c != null) {
            c.executor().execute(() -> rejectIdle("the server is at its limit of " + options.maxConnections()
                    + " connections (option max_connections) and closed this idle connection to serve a new one; retry on a new connection"));
        }
        return true;
    }

    /** Evicts the connection unless a request of it got under way since it was chosen (the limit is soft by one then). */
    private void rejectIdle(String why) {
        if (phase == Phase.IDLE || phase == Phase.HEADERS) {
            reject(why);
        }
    }

    /**
     * Answers 503 with {@code Connection: close} and half-closes (see the class comment). Runs on
     * the connection's event loop, only while no request of the connection is being served, so
     * the 503 is the next reply in order.
     */
    private void reject(String why) {
        ChannelHandlerContext c = ctx;
        if (c == null || draining || !c.channel().isActive()) {
            return;
        }
        cancelTimer();
        if (c.pipeline().get("tls") != null) {
            c.close(); // a 503 needs the handshake first; TLS clients see the close
            return;
        }
        draining = true;
        broken = true;
        phase = Phase.BUSY;
        c.channel().config().setAutoRead(true);
        c.channel().writeAndFlush(Responses.error(HttpResponseStatus.SERVICE_UNAVAILABLE, why, false)).addListener((ChannelFutureListener) f -> {
            if (!f.isSuccess() || !(f.channel() instanceof SocketChannel sc)) {
                f.channel().close();
                return;
            }
            sc.shutdownOutput();
            c.executor().schedule(() -> {
                c.channel().close();
            }, DRAIN_MILLIS, TimeUnit.MILLISECONDS);
        });
    }

    /** A request's headers were decoded. */
    void headersRead() {
        partial = true;
        if (phase != Phase.BUSY) {
            enter(Phase.BODY);
        }
    }

    /** A request's body ended; it goes to the {@link PipelineOrder}. */
    void bodyRead() {
        partial = false;
        if (phase == Phase.BODY) {
            enter(Phase.BUSY);
        }
    }

    /** The pipeline handed a request to the handler. */
    void requestStarted() {
        enter(Phase.BUSY);
    }

    /** The reply to the current request was written to its end. */
    void replied() {
        served = true;
        lastActivity = System.nanoTime();
        enter(partial ? Phase.BODY : Phase.IDLE);
    }

    /** The connection's framing failed; it closes after its 400. */
    void framingFailed() {
        broken = true;
        enter(Phase.BUSY);
    }

    boolean isBroken() {
        return broken;
    }

    private void enter(Phase p) {
        cancelTimer();
        phase = p;
        ChannelHandlerContext c = ctx;
        if (c == null) {
            return;
        }
        long ms = switch (p) {
            case IDLE -> options.idleTimeoutMillis();
            case HEADERS -> options.headerTimeoutMillis();
            case BODY -> options.bodyTimeoutMillis();
            case BUSY -> 0;
        };
        if (ms > 0) {
            timer = c.executor().schedule(() -> expire(p), ms, TimeUnit.MILLISECONDS);
        }
    }

    private void cancelTimer() {
        Future<?> t = timer;
        if (t != null) {
            t.cancel(false);
            timer = null;
        }
    }

    private void expire(Phase p) {
        ChannelHandlerContext c = ctx;
        if (c == null || phase != p || !c.channel().isActive()) {
            return;
        }
        timer = null;
        if (p == Phase.IDLE) {
            log.debug("http connection {} idle for {} ms (option idle_timeout_ms): closed", c.channel().remoteAddress(), options.idleTimeoutMillis());
            c.close();
            return;
        }
        String what = p == Phase.HEADERS ? "request headers not complete within " + options.headerTimeoutMillis() + " ms (option header_timeout_ms)"
                : "request body not complete within " + options.bodyTimeoutMillis() + " ms (option body_timeout_ms)";
        log.debug("http connection {}: {}; closed", c.channel().remoteAddress(), what);
        broken = true;
        phase = Phase.BUSY;
        c.channel().config().setAutoRead(false);
        // no request of this connection is being served, so the 408 is the next reply in order
        c.channel().writeAndFlush(Responses.error(HttpResponseStatus.REQUEST_TIMEOUT, what, false))
                .addListener(ChannelFutureListener.CLOSE);
    }
}
