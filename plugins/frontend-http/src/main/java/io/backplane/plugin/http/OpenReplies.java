package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.LastHttpContent;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The frontend's open replies, for a bounded shutdown (DESIGN L10, O2): {@link #drain()} turns new
 * requests away, {@link #awaitIdle} waits for the open ones, {@link #failOpen} answers what is
 * left 503. Every {@link Reply} is counted here, and in the frontend's {@code inFlight}, from the
 * moment it is made until it is written. Thread-safe.
 */
final class OpenReplies {
    private final AtomicInteger inFlight;
    private final Set<Reply> open = ConcurrentHashMap.newKeySet();
    private final Object idle = new Object();
    private volatile boolean draining;

    OpenReplies(AtomicInteger inFlight) {
        this.inFlight = requireNonNull(inFlight, "inFlight is null");
    }

    void opened(Reply r) {
        inFlight.incrementAndGet();
        open.add(r);
    }

    void ended(Reply r) {
        inFlight.decrementAndGet();
        open.remove(r);
        if (draining && open.isEmpty()) {
            synchronized (idle) {
                idle.notifyAll();
            }
        }
    }

    /** From now on, new requests are answered 503 and their connections closed. */
    void drain() {
        draining = true;
    }

    boolean draining() {
        return draining;
    }

    /** Waits up to {@code millis} for every open request to be answered; whether none is open. */
    boolean awaitIdle(long millis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        synchronized (idle) {
            while (!open.isEmpty()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(idle, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return open.isEmpty();
                }
            }
            return true;
        }
    }

    /** Answers every open request 503 (an event stream under way is ended and its connection closed); how many. */
    int failOpen(String message) {
        int n = 0;
        List<ChannelFuture> closing = new ArrayList<>();
        for (Reply r : List.copyOf(open)) {
            if (r.streaming) {
                if (r.finishStream()) {
                    r.ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT).addListener(ChannelFutureListener.CLOSE);
                    closing.add(r.ctx.channel().closeFuture());
                    n++;
                }
            } else if (r.sendClosing(Responses.error(HttpResponseStatus.SERVICE_UNAVAILABLE, message, false))) {
                closing.add(r.ctx.channel().closeFuture());
                n++;
            }
        }
        // The answers are written on the event loops: wait (bounded) until they are flushed and their
        // connections closed, so that stopping the event loops next cannot drop them unwritten.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        for (ChannelFuture f : closing) {
            long left = deadline - System.nanoTime();
            if (left <= 0 || !f.awaitUninterruptibly(TimeUnit.NANOSECONDS.toMillis(left) + 1)) {
                break;
            }
        }
        return n;
    }
}
