package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.BackplaneException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * The answer to one request on one connection: a JSON reply, an error reply, or a server-sent
 * event stream. Exactly one answer is written (later attempts are ignored), and
 * what {@link #whenEnded} registered runs once when it is written (or failed to be), on the event loop; Netty queues writes from
 * other threads on the channel's event loop in order.
 */
final class Exchange {
    private static final byte[] DATA = "data: ".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] END = "\n\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);

    private final Channel channel;
    private final boolean keepAlive;
    private final List<Runnable> onEnd = new ArrayList<>(2);
    private volatile Consumer<BackplaneException> abort = this::failShutdown;
    private final AtomicBoolean answered = new AtomicBoolean();
    private final AtomicBoolean ended = new AtomicBoolean();
    private volatile boolean streaming;

    Exchange(Channel channel, boolean keepAlive) {
        this.channel = requireNonNull(channel, "channel is null");
        this.keepAlive = keepAlive;
    }

    /** Runs {@code r} once the answer is written, at once if it was. */
    void whenEnded(Runnable r) {
        synchronized (onEnd) {
            if (!ended.get()) {
                onEnd.add(r);
                return;
            }
        }
        r.run();
    }

    /** What {@link #abort} does: by default an error reply (or event) with {@code e}. */
    void onAbort(Consumer<BackplaneException> a) {
        abort = requireNonNull(a, "a is null");
    }

    /** Ends the exchange with {@code e} (the frontend closes with it open). */
    void abort(BackplaneException e) {
        abort.accept(e);
    }

    private void failShutdown(BackplaneException e) {
        fail(ApiError.of(e));
    }

    private void ended() {
        List<Runnable> run;
        synchronized (onEnd) {
            run = List.copyOf(onEnd);
            onEnd.clear();
        }
        for (Runnable r : run) {
            r.run();
        }
    }

    Channel channel() {
        return channel;
    }

    /** Whether an answer was started or written. */
    boolean answered() {
        return answered.get();
    }

    /** A whole JSON reply, 200. */
    void reply(JsonNode body) {
        full(HttpResponseStatus.OK, Json.bytes(body));
    }

    /** An error reply with its status; in a stream already started, the error event and the stream's end. */
    void fail(ApiError e) {
        if (streaming) {
            event(e.body());
            endStream(false);
            return;
        }
        full(HttpResponseStatus.valueOf(e.status()), Json.bytes(e.body()));
    }

    private void full(HttpResponseStatus status, ByteBuf body) {
        if (!answered.compareAndSet(false, true)) {
            body.release();
            return;
        }
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, body);
        r.headers().set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.APPLICATION_JSON);
        HttpUtil.setContentLength(r, body.readableBytes());
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        finish(channel.writeAndFlush(r));
    }

    /** The head of an event stream (200, {@code text/event-stream}, chunked). */
    void startStream() {
        if (!answered.compareAndSet(false, true)) {
            return;
        }
        streaming = true;
        HttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        head.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream; charset=utf-8");
        head.headers().set(HttpHeaderNames.CACHE_CONTROL, HttpHeaderValues.NO_CACHE);
        HttpUtil.setTransferEncodingChunked(head, true);
        if (!keepAlive) {
            head.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        channel.write(head);
    }

    /** One event already written out ({@code data: <json>\n\n}), flushed. */
    void event(byte[] bytes) {
        if (!streaming || ended.get()) {
            return;
        }
        channel.writeAndFlush(new DefaultHttpContent(Unpooled.wrappedBuffer(bytes)));
    }

    /** One event, {@code data: <json>}, flushed. */
    void event(JsonNode json) {
        if (!streaming || ended.get()) {
            return;
        }
        ByteBuf ev = channel.alloc().buffer(256);
        try (ByteBufOutputStream out = new ByteBufOutputStream(ev)) {
            out.write(DATA);
            Json.MAPPER.writeValue((java.io.OutputStream) out, json);
            out.write(END);
        } catch (IOException | RuntimeException e) {
            ev.release();
            throw new IllegalStateException("could not write an event: " + e, e);
        }
        channel.writeAndFlush(new DefaultHttpContent(ev));
    }

    /** Ends the stream: {@code data: [DONE]} when it ended normally, then the last chunk. */
    void endStream(boolean done) {
        if (!streaming || !ended.compareAndSet(false, true)) {
            return;
        }
        if (done) {
            channel.write(new DefaultHttpContent(Unpooled.wrappedBuffer(DONE)));
        }
        ChannelFuture f = channel.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
        // ended once written (or failed to): a closing frontend waits for it before it stops the event loops
        f.addListener(x -> ended());
    }

    private void finish(ChannelFuture f) {
        if (!keepAlive) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
        if (ended.compareAndSet(false, true)) {
            f.addListener(x -> ended());
        }
    }

    /** Completes when the connection can take more writes, or is closed (DESIGN P9). */
    CompletionStage<Void> writable() {
        return Writable.of(channel);
    }

    /** Waiters for a connection's writability, in a channel attribute; woken by the handler. */
    static final class Writable {
        private static final io.netty.util.AttributeKey<CompletableFuture<Void>> WAITER =
                io.netty.util.AttributeKey.valueOf(Writable.class, "openaiWritable");

        private Writable() {
        }

        static CompletionStage<Void> of(Channel ch) {
            if (ch.isWritable() || !ch.isActive()) {
                return CompletableFuture.completedStage(null);
            }
            CompletableFuture<Void> fresh = new CompletableFuture<>();
            CompletableFuture<Void> w = ch.attr(WAITER).setIfAbsent(fresh);
            if (w == null) {
                w = fresh;
            }
            if (ch.isWritable() || !ch.isActive()) {
                wake(ch);
            }
            return w;
        }

        /** The connection turned writable, or closed. */
        static void wake(Channel ch) {
            CompletableFuture<Void> w = ch.attr(WAITER).getAndSet(null);
            if (w != null) {
                w.complete(null);
            }
        }
    }
}
