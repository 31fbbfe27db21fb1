package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.backplane.protocol.SystemSharedMemory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.RequestTrace;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.RequestTracer;
import io.netty.channel.ChannelFuture;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.util.concurrent.GenericFutureListener;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code POST /v2/models/<m>[/versions/<v>]/infer}: the Open Inference Protocol's inference, JSON
 * or with Triton's binary tensor extension ({@link InferCodec#HEADER_LENGTH}; inputs may name
 * system shared-memory regions), or Triton's raw binary request (that header 0: the body is the
 * model's one input, {@link InferCodec#parseRaw}). Owns, per request:
 * <ul>
 *   <li>one answer (DESIGN L1): the host's future ends the reply exactly once, from whatever
 *       thread completes it, never blocking an event loop;
 *   <li>cancellation: a connection that closes first cancels the host's future (B6), and the
 *       close listener is removed when the future ends, so nothing stays open per connection;
 *   <li>the request buffers parsed from the body are released exactly once, on every path;
 *   <li>the trace (the trace extension's {@code traceparent}) is started before the host sees the
 *       request and finished before the reply is written.
 * </ul>
 */
final class InferenceHandler implements RestRoute {
    private static final Logger log = LoggerFactory.getLogger(InferenceHandler.class);
    static final String TRACEPARENT = "traceparent";

    private final InferenceService service;
    private final SystemSharedMemory shm;
    private final RequestTracer tracer;

    InferenceHandler(InferenceService service, SystemSharedMemory shm, RequestTracer tracer) {
        this.service = requireNonNull(service, "service is null");
        this.shm = requireNonNull(shm, "shm is null");
        this.tracer = requireNonNull(tracer, "tracer is null");
    }

    @Override
    public void serve(RestCall call) {
        call.requireMethod(HttpMethod.POST);
        FullHttpRequest req = call.request();
        Reply reply = call.reply();
        String model = call.model();
        String h = req.headers().get(InferCodec.HEADER_LENGTH);
        int headerLength = -1;
        if (h != null) {
            try {
                headerLength = Integer.parseInt(h.trim());
            } catch (NumberFormatException e) {
                throw BackplaneException.invalid("Inference-Header-Content-Length '" + h + "' is not an integer");
            }
            if (headerLength < 0) {
                throw BackplaneException.invalid("Inference-Header-Content-Length " + headerLength + " is negative");
            }
        }
        InferCodec.Parsed parsed = headerLength == 0
                ? InferCodec.parseRaw(model, call.version(), req.content(), service.modelConfig(model, call.version()))
                : InferCodec.parse(model, call.version(), req.content(), headerLength, shm);
        RequestTrace trace = tracer.start(model, req.headers().get(TRACEPARENT));
        CompletableFuture<InferenceResponse> f;
        try {
            f = service.infer(trace == RequestTrace.NONE ? parsed.request() : parsed.request().toBuilder().trace(trace).build());
        } catch (RuntimeException e) {
            parsed.release();
            trace.finish(e);
            throw e;
        }
        GenericFutureListener<ChannelFuture> onClose = cf -> f.cancel(false);
        ChannelFuture closeFuture = reply.ctx.channel().closeFuture();
        if (!f.isDone()) {
            closeFuture.addListener(onClose);
        }
        // One callback: the trace ends before the reply goes out (two callbacks on one future run in no set order).
        f.whenComplete((r, e) -> {
            try {
                trace.finish(e != null ? e : r.error());
            } catch (RuntimeException bad) {
                log.warn("the request trace failed to finish; the reply is still sent", bad);
            }
            closeFuture.removeListener(onClose);
            if (e != null) {
                parsed.release();
                reply.fail(e);
                return;
            }
            try {
                if (r.error() != null) {
                    reply.fail(r.error());
                    return;
                }
                InferCodec.Encoded enc = InferCodec.encode(r, parsed);
                FullHttpResponse resp;
                if (enc.headerLength() >= 0) {
                    resp = Responses.full(HttpResponseStatus.OK, enc.body(), HttpHeaderValues.APPLICATION_OCTET_STREAM, reply.keepAlive);
                    resp.headers().set(InferCodec.HEADER_LENGTH, enc.headerLength());
                } else {
                    resp = Responses.json(HttpResponseStatus.OK, enc.body(), reply.keepAlive);
                }
                reply.send(resp);
            } catch (Throwable t) {
                reply.fail(t);
            } finally {
                parsed.release();
            }
        });
    }
}
