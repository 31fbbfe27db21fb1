package io.backplane.plugin.http;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.DecoderResult;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * Enforces RFC 9112 message framing on each connection, right after the decoder: a request that
 * failed to decode (bad request line, headers, chunk sizes, or {@code Content-Length} with
 * {@code Transfer-Encoding}), a transfer coding other than a single {@code chunked}, or an HTTP/1.1
 * request without {@code Host} is answered 400 with {@code Connection: close} (in its turn, after
 * the replies to the requests before it), and the connection closes: whatever follows on it is discarded, since its boundaries can no longer be trusted.
 * Tells the {@link ConnectionGuard} when a request's headers and its body have arrived.
 * One instance per connection.
 */
final class FramingGuard extends ChannelInboundHandlerAdapter {
    private final ConnectionGuard guard;
    private boolean broken;

    FramingGuard(ConnectionGuard guard) {
        this.guard = guard;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (broken) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest req) {
            String problem = problem(req);
            if (problem != null) {
                ReferenceCountUtil.release(msg);
                refuse(ctx, problem);
                return;
            }
            guard.headersRead();
        } else if (msg instanceof HttpObject o && !o.decoderResult().isSuccess()) {
            ReferenceCountUtil.release(msg);
            refuse(ctx, "malformed HTTP request: " + cause(o.decoderResult()));
            return;
        }
        if (msg instanceof LastHttpContent) {
            guard.bodyRead();
        }
        ctx.fireChannelRead(msg);
    }

    private static @Nullable String problem(HttpRequest req) {
        if (!req.decoderResult().isSuccess()) {
            return "malformed HTTP request: " + cause(req.decoderResult());
        }
        HttpHeaders h = req.headers();
        List<String> codings = h.getAll(HttpHeaderNames.TRANSFER_ENCODING);
        if (!codings.isEmpty()) {
            if (codings.size() != 1 || !codings.getFirst().trim().toLowerCase(Locale.ROOT).equals("chunked")) {
                return "unsupported Transfer-Encoding " + codings + "; only 'chunked' is accepted";
            }
            if (h.contains(HttpHeaderNames.CONTENT_LENGTH)) {
                return "the request has both Content-Length and Transfer-Encoding; send one of them";
            }
        }
        if (req.protocolVersion().equals(HttpVersion.HTTP_1_1) && h.getAll(HttpHeaderNames.HOST).size() != 1) {
            return "an HTTP/1.1 request needs exactly one Host header (RFC 9112 section 3.2)";
        }
        return null;
    }

    private static String cause(DecoderResult r) {
        Throwable c = r.cause();
        return c == null ? "unknown" : c.getMessage() == null ? c.toString() : c.getMessage();
    }

    private void refuse(ChannelHandlerContext ctx, String message) {
        broken = true;
        guard.framingFailed();
        ctx.channel().config().setAutoRead(false);
        // answered in turn by PipelineOrder, after the replies to the requests before it
        ctx.fireChannelRead(new PipelineOrder.BadRequest(message));
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        if (!broken) {
            ctx.fireChannelReadComplete();
        }
    }

}
