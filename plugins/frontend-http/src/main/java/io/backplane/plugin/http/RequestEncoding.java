package io.backplane.plugin.http;

import io.backplane.spi.BackplaneException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufInputStream;
import io.netty.buffer.ByteBufOutputStream;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Locale;
import java.util.zip.GZIPInputStream;
import java.util.zip.InflaterInputStream;
import java.util.zip.ZipException;
import org.jspecify.annotations.Nullable;

/**
 * A compressed request body ({@code Content-Encoding: gzip} or {@code deflate}, as Triton's clients
 * send with {@code request_compression_algorithm}), inflated before it is routed. The inflated
 * size is capped while inflating: a body that would inflate past the limit is refused as soon as
 * it passes it, so a small compressed body can never make the server hold more than the limit
 * (a "zip bomb"). Any other encoding but {@code identity} is refused, naming it.
 */
final class RequestEncoding {
    private RequestEncoding() {
    }

    /**
     * The request with its body inflated, or {@code null} when it is not compressed (use it as it
     * is). The caller releases the returned request.
     *
     * @param limit the largest inflated body, in bytes (the frontend's {@code max_body_bytes})
     * @param alloc where the inflated body's buffer comes from
     * @throws BackplaneException INVALID_ARGUMENT for an unknown encoding, a corrupt body, or one
     *     that inflates past {@code limit}
     */
    static @Nullable FullHttpRequest inflate(FullHttpRequest req, long limit, ByteBufAllocator alloc) {
        String encoding = req.headers().get(HttpHeaderNames.CONTENT_ENCODING);
        if (encoding == null) {
            return null;
        }
        String e = encoding.trim().toLowerCase(Locale.ROOT);
        if (e.isEmpty() || e.equals("identity")) {
            return null;
        }
        if (!e.equals("gzip") && !e.equals("deflate")) {
            throw BackplaneException.invalid("Content-Encoding '" + encoding + "' is not supported; send the body uncompressed, or "
                    + "compressed with gzip or deflate");
        }
        // From the connection's (pooled) allocator: an inflated body is released when its request was routed, and its memory serves
        // the next one, where fresh arrays for every compressed request made the heap grow under a stream of them.
        ByteBuf out = alloc.buffer(Math.min(Math.max(req.content().readableBytes() * 4, 256), 1 << 20));
        try (InputStream in = e.equals("gzip") ? new GZIPInputStream(new ByteBufInputStream(req.content().duplicate()))
                : new InflaterInputStream(new ByteBufInputStream(req.content().duplicate()));
             ByteBufOutputStream sink = new ByteBufOutputStream(out)) {
            byte[] chunk = new byte[64 * 1024];
            long total = 0;
            for (int n; (n = in.read(chunk)) > 0;) {
                total += n;
                if (total > limit) {
                    // Triton's words (its QA matches them), then ours.
                    throw BackplaneException.invalid("Decompressed data size exceeds the maximum allowed value of " + limit + " bytes. Use "
                            + "--http-max-input-size to increase the limit. (It is the http frontend's option max_body_bytes.)");
                }
                sink.write(chunk, 0, n);
            }
        } catch (ZipException | java.io.EOFException bad) {
            out.release();
            throw BackplaneException.invalid("the " + e + " request body (Content-Encoding: " + encoding + ") is corrupt or cut short: "
                    + bad.getMessage());
        } catch (IOException io) {
            out.release();
            throw new UncheckedIOException(io);
        } catch (RuntimeException r) {
            out.release();
            throw r;
        }
        FullHttpRequest inflated = req.replace(out);
        inflated.headers().remove(HttpHeaderNames.CONTENT_ENCODING);
        inflated.headers().set(HttpHeaderNames.CONTENT_LENGTH, out.readableBytes());
        return inflated;
    }
}
