package io.backplane.plugin.http;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.MemoryReservation;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayDeque;
import java.util.Queue;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Admission by memory (O1), before the body is aggregated: each request reserves its announced
 * {@code Content-Length} from the host's memory budget as soon as its headers arrive (a chunked
 * body grows its reservation chunk by chunk), and gives it back when its response has been written
 * to the end. A body over its encoding's limit ({@code max_body_bytes} for JSON and every other
 * body, {@code max_binary_body_bytes} for the binary tensor extension) is answered 413, one the
 * budget cannot hold 503 ({@code RESOURCE_EXHAUSTED}); either way at once, in its turn among
 * pipelined requests, its body never held, and the connection then closes (the rest of the upload
 * is read and dropped, so the client sees the answer rather than a reset).
 *
 * <p>A failure to allocate memory while reading (Netty's direct memory) is answered 503 and
 * closes only that connection. Runs on the connection's event loop only; one per connection.
 */
final class BodyAdmission extends ChannelDuplexHandler {
    private static final Logger log = LoggerFactory.getLogger(BodyAdmission.class);

    private final InferenceService service;
    private final ConnectionGuard guard;
    private final long jsonLimit;
    private final long binaryLimit;
    /** Reservations of the requests read and not yet answered, in order (responses are in order). */
    private final Queue<MemoryReservation> answering = new ArrayDeque<>();
    private @Nullable MemoryReservation reading;
    private long readingLimit;
    private long readingBytes;
    private boolean chunked;
    private boolean refused;

    BodyAdmission(InferenceService service, ConnectionGuard guard, long jsonLimit, long binaryLimit) {
        this.service = service;
        this.guard = guard;
        this.jsonLimit = jsonLimit;
        this.binaryLimit = binaryLimit;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (refused) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest req) {
            boolean binary = req.headers().contains(InferCodec.HEADER_LENGTH);
            long limit = binary ? binaryLimit : jsonLimit;
            long length = HttpUtil.getContentLength(req, -1L);
            String what = req.method() + " " + shorten(req.uri());
            if (length > limit) {
                refuse(ctx, msg, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, tooLarge(length, binary, limit));
                return;
            }
            MemoryReservation r;
            try {
                r = service.reserveMemory(Math.max(length, 0), what);
            } catch (BackplaneException e) {
                refuse(ctx, msg, HttpResponseStatus.SERVICE_UNAVAILABLE, e.getMessage());
                return;
            }
            reading = r;
            answering.add(r);
            readingLimit = limit;
            readingBytes = 0;
            chunked = length < 0;
        }
        if (msg instanceof HttpContent c) {
            MemoryReservation r = reading;
            int n = c.content().readableBytes();
            readingBytes += n;
            if (r != null && chunked && n > 0) {
                if (readingBytes > readingLimit) {
                    refuse(ctx, msg, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, tooLarge(readingBytes, readingLimit == binaryLimit, readingLimit));
                    return;
                }
                try {
                    r.grow(n);
                } catch (BackplaneException e) {
                    refuse(ctx, msg, HttpResponseStatus.SERVICE_UNAVAILABLE, e.getMessage());
                    return;
                }
            }
            if (msg instanceof LastHttpContent) {
                reading = null;
            }
        }
        ctx.fireChannelRead(msg);
    }

    private static String tooLarge(long length, boolean binary, long limit) {
        return "request body of " + length + " bytes exceeds the limit of " + limit + " bytes for "
                + (binary ? "binary tensor bodies (option max_binary_body_bytes)" : "JSON bodies (option max_body_bytes); "
                        + "send large tensors with the binary tensor extension or shared memory");
    }

    private static String shorten(String uri) {
        return uri.length() <= 200 ? uri : uri.substring(0, 200) + "…";
    }

    /**
     * Refuses the request being read: whatever of it was passed on is dropped by the aggregator
     * (the refusal ends its turn), the rest of the connection's input is dropped here, and the
     * answer goes out in order through {@link PipelineOrder}.
     */
    private void refuse(ChannelHandlerContext ctx, Object msg, HttpResponseStatus status, String message) {
        ReferenceCountUtil.release(msg);
        refused = true;
        MemoryReservation r = reading;
        if (r != null) {
            answering.remove(r);
            r.close();
            reading = null;
        }
        guard.framingFailed();
        log.debug("http connection {}: {} {}", ctx.channel().remoteAddress(), status.code(), message);
        ctx.fireChannelRead(new PipelineOrder.BadRequest(status, message, true));
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (msg instanceof LastHttpContent && !(msg instanceof HttpResponse h && h.status().codeClass() == io.netty.handler.codec.http.HttpStatusClass.INFORMATIONAL)) {
            MemoryReservation r = answering.poll();
            if (r != null) {
                ChannelPromise p = promise.unvoid();
                p.addListener(f -> r.close());
                ctx.write(msg, p);
                return;
            }
        }
        ctx.write(msg, promise);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof OutOfMemoryError) {
            log.warn("http connection {}: out of memory while reading a request ({}); answered 503 and closed", ctx.channel().remoteAddress(),
                    cause.toString());
            if (!refused) {
                refused = true;
                guard.framingFailed();
                ctx.fireChannelRead(new PipelineOrder.BadRequest(HttpResponseStatus.SERVICE_UNAVAILABLE,
                        "the server ran out of memory reading this request; retry later", true));
            }
            return;
        }
        ctx.fireExceptionCaught(cause);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        releaseAll();
        ctx.fireChannelInactive();
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        releaseAll();
    }

    private void releaseAll() {
        MemoryReservation r;
        while ((r = answering.poll()) != null) {
            r.close();
        }
        reading = null;
    }
}
