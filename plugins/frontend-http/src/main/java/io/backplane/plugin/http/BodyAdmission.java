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
 * to the end. A body over its encoding's limit ({@code max_body_bytes} for JSON, Triton's raw binary
 * request and every other body, {@code max_binary_body_bytes} for the binary tensor extension) is
 * answered 400 (as Triton answers it, in its words: {@link #tooLarge}), one the
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
    /**
     * A chunked body may arrive in at most this many non-empty pieces while they average under
     * {@link #SMALL_CHUNK_BYTES}: each costs a buffer and a component of the aggregate however
     * small, so a body of a million one-byte chunks would cost far more than its bytes. Triton's
     * limit and words; a large upload in big chunks is never refused by it.
     */
    static final int MAX_SMALL_CHUNKS = 65_536;
    static final int SMALL_CHUNK_BYTES = 4096;

    private long readingLimit;
    private long readingPieces;
    private Kind readingKind = Kind.JSON;
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
            Kind kind = Kind.of(req);
            long limit = kind == Kind.BINARY ? binaryLimit : jsonLimit;
            long length = HttpUtil.getContentLength(req, -1L);
            String what = req.method() + " " + shorten(req.uri());
            if (length > limit) {
                refuse(ctx, msg, HttpResponseStatus.BAD_REQUEST, tooLarge(length, kind, limit));
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
            readingKind = kind;
            readingBytes = 0;
            readingPieces = 0;
            chunked = length < 0;
        }
        if (msg instanceof HttpContent c) {
            MemoryReservation r = reading;
            int n = c.content().readableBytes();
            readingBytes += n;
            if (r != null && chunked && n > 0) {
                readingPieces++;
                if (readingPieces > MAX_SMALL_CHUNKS && readingBytes < readingPieces * SMALL_CHUNK_BYTES) {
                    refuse(ctx, msg, HttpResponseStatus.BAD_REQUEST, "Chunked request body exceeds maximum of " + MAX_SMALL_CHUNKS
                            + " non-empty chunks. Send fewer or larger HTTP chunks. (These average " + readingBytes / readingPieces + " bytes.)");
                    return;
                }
                if (readingBytes > readingLimit) {
                    refuse(ctx, msg, HttpResponseStatus.BAD_REQUEST, tooLarge(readingBytes, readingKind, readingLimit));
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

    /** What a body holds, which decides its limit and how its refusal reads. */
    enum Kind {
        /** JSON, or anything else without the binary tensor extension's header: {@code max_body_bytes}. */
        JSON,
        /** Triton's raw binary request ({@code Inference-Header-Content-Length: 0}): one input's bytes, {@code max_body_bytes}. */
        RAW,
        /** The binary tensor extension: a JSON header, then tensor bytes: {@code max_binary_body_bytes}. */
        BINARY;

        static Kind of(HttpRequest req) {
            String h = req.headers().get(InferCodec.HEADER_LENGTH);
            if (h == null || !infer(req.uri())) {
                return JSON; // only inference takes the extension: any other endpoint reads JSON whatever the header says
            }
            return h.trim().equals("0") ? RAW : BINARY;
        }
    }

    private static boolean infer(String uri) {
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        return path.endsWith("/infer") || path.endsWith("/infer/");
    }

    /** The refusal of a body over its limit: for JSON and raw bodies Triton's words (its QA and clients match them), then ours. */
    static String tooLarge(long length, Kind kind, long limit) {
        return switch (kind) {
            case JSON -> "request JSON size of " + length + " bytes exceeds the maximum allowed input size of " + limit + " bytes. Use "
                    + "--http-max-input-size to increase the limit. (It is the http frontend's option max_body_bytes.) Large tensors can also"
                    + " be sent with the binary tensor extension or through shared memory.";
            case RAW -> "Raw input has a byte_size (" + length + " bytes) that exceeds the maximum allowed value of " + limit + " bytes. Use "
                    + "--http-max-input-size to increase the limit. (It is the http frontend's option max_body_bytes.)";
            case BINARY -> "request body of " + length + " bytes exceeds the maximum allowed value of " + limit + " bytes for binary tensor"
                    + " bodies (the http frontend's option max_binary_body_bytes); send larger tensors through shared memory.";
        };
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
        // The rest of the upload is dropped as raw bytes, before the decoder: decoding it only to drop it cost an object per chunk
        // (a million one-byte chunks, a million messages of garbage).
        if (ctx.pipeline().get("decoder") != null && ctx.pipeline().get(DROP_INPUT) == null) {
            ctx.pipeline().addBefore("decoder", DROP_INPUT, new DropInput());
        }
        ctx.fireChannelRead(new PipelineOrder.BadRequest(status, message, true));
    }

    static final String DROP_INPUT = "drop-input";

    /** Releases whatever the connection still reads once its request was refused (the connection closes after the answer). */
    private static final class DropInput extends io.netty.channel.ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ReferenceCountUtil.release(msg);
        }
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
