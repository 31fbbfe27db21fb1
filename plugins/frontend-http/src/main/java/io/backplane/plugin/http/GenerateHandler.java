package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.concurrent.GenericFutureListener;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletionStage;
import org.jspecify.annotations.Nullable;

/**
 * The streaming handler: Triton's generate extension, {@code POST .../generate} (exactly one
 * response, as JSON) and {@code POST .../generate_stream} (each response as one server-sent event
 * {@code data: {...}}), both over the host's decoupled {@link InferenceService#stream}. Owns:
 * <ul>
 *   <li>DESIGN P9 at the REST edge: a slow reader slows the model. The stream's
 *       {@link ResponseObserver#ready()} is {@link Writability#writable}, which completes when
 *       Netty's outbound buffer drained under its low water mark or the channel closed. No lock
 *       is held across a write (the observers' monitor guards only the order of events).
 *   <li>one answer (L1): an error before the first event is a plain error reply; after it, the
 *       error is the stream's last event and the stream is ended, never a second reply.
 *   <li>cancellation: a connection that closes first cancels the {@link RequestHandle}; the close
 *       listener is removed when the stream ends.
 * </ul>
 */
final class GenerateHandler implements RestRoute {
    private final InferenceService service;

    GenerateHandler(InferenceService service) {
        this.service = requireNonNull(service, "service is null");
    }

    @Override
    public void serve(RestCall call) {
        call.requireMethod(HttpMethod.POST);
        boolean stream = call.action().equals("generate_stream");
        Reply reply = call.reply();
        JsonNode root = InferCodec.readJson(call.request().content());
        ModelConfig config = service.modelConfig(call.model(), call.version());
        InferenceRequest request = InferCodec.parseGenerate(call.model(), call.version(), root, config);
        ResponseObserver observer = stream ? new SseObserver(reply) : new CollectingObserver(reply);
        RequestHandle handle = service.stream(request, observer);
        if (!handle.isDone()) {
            ChannelFuture closeFuture = reply.ctx.channel().closeFuture();
            GenericFutureListener<ChannelFuture> onClose = cf -> handle.cancel();
            closeFuture.addListener(onClose);
            if (observer instanceof SseObserver sse) {
                sse.onEnd = () -> closeFuture.removeListener(onClose);
            } else {
                ((CollectingObserver) observer).onEnd = () -> closeFuture.removeListener(onClose);
            }
            if (handle.isDone()) {
                closeFuture.removeListener(onClose);
            }
        }
    }

    /** /generate: exactly one response expected. */
    private static final class CollectingObserver implements ResponseObserver {
        private final Reply reply;
        private final List<InferenceResponse> responses = new ArrayList<>(1);
        volatile @Nullable Runnable onEnd;

        CollectingObserver(Reply reply) {
            this.reply = reply;
        }

        @Override
        public void onResponse(InferenceResponse response) {
            responses.add(response);
        }

        @Override
        public void onComplete() {
            end();
            List<InferenceResponse> ok = responses.stream().filter(r -> !r.isError()).toList();
            InferenceResponse firstError = responses.stream().filter(InferenceResponse::isError).findFirst().orElse(null);
            if (firstError != null) {
                reply.fail(Objects.requireNonNull(firstError.error()));
            } else if (ok.size() != 1) {
                reply.fail(BackplaneException.invalid("the model sent " + ok.size() + " responses; /generate expects exactly one, use /generate_stream"));
            } else {
                try {
                    reply.send(Responses.json(HttpResponseStatus.OK, generateJson(ok.get(0)), reply.keepAlive));
                } catch (Throwable t) {
                    reply.fail(t);
                }
            }
        }

        @Override
        public void onError(BackplaneException error) {
            end();
            reply.fail(error);
        }

        private void end() {
            Runnable r = onEnd;
            if (r != null) {
                r.run();
            }
        }
    }

    /** /generate_stream: each response as one server-sent event {@code data: {...}}. */
    private static final class SseObserver implements ResponseObserver {
        private final Reply reply;
        private boolean started;
        volatile @Nullable Runnable onEnd;

        SseObserver(Reply reply) {
            this.reply = reply;
        }

        private void start() {
            if (!started) {
                started = true;
                HttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
                head.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/event-stream");
                head.headers().set(HttpHeaderNames.CACHE_CONTROL, HttpHeaderValues.NO_CACHE);
                HttpUtil.setTransferEncodingChunked(head, true);
                if (!reply.keepAlive) {
                    head.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
                }
                reply.streaming = true;
                reply.ctx.write(head);
            }
        }

        /** A slow reader slows the model: the backend waits until Netty's outbound buffer drains. */
        @Override
        public CompletionStage<Void> ready() {
            return Writability.writable(reply.ctx.channel());
        }

        private void event(ByteBuf json) {
            ByteBuf ev = Unpooled.buffer(json.readableBytes() + 8);
            ev.writeBytes("data: ".getBytes(StandardCharsets.US_ASCII));
            ev.writeBytes(json);
            json.release();
            ev.writeBytes("\n\n".getBytes(StandardCharsets.US_ASCII));
            reply.ctx.writeAndFlush(new DefaultHttpContent(ev));
        }

        @Override
        public synchronized void onResponse(InferenceResponse response) {
            start();
            BackplaneException e = response.error();
            ByteBuf body;
            try {
                body = e != null ? Responses.errorBody(e.getMessage()) : generateJson(response);
            } catch (RuntimeException x) {
                body = Responses.errorBody(String.valueOf(x.getMessage()));
            }
            event(body);
        }

        @Override
        public synchronized void onComplete() {
            start();
            finish();
        }

        @Override
        public synchronized void onError(BackplaneException error) {
            if (!started) {
                end();
                reply.fail(error);
                return;
            }
            event(Responses.errorBody(error.getMessage()));
            finish();
        }

        private void finish() {
            end();
            ChannelFuture f = reply.ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
            if (!reply.keepAlive) {
                f.addListener(ChannelFutureListener.CLOSE);
            }
            reply.finishStream();
        }

        private void end() {
            Runnable r = onEnd;
            if (r != null) {
                r.run();
            }
        }
    }

    private static ByteBuf generateJson(InferenceResponse r) {
        ByteBuf buf = Unpooled.buffer(128);
        try (JsonGenerator g = Json.generator(buf)) {
            g.writeStartObject();
            g.writeStringField("model_name", r.modelName());
            g.writeStringField("model_version", Long.toString(r.modelVersion()));
            if (!r.requestId().isEmpty()) {
                g.writeStringField("id", r.requestId());
            }
            InferCodec.writeParameters(g, r.parameters());
            for (Tensor t : r.outputs()) {
                if (t.memoryType() == MemoryType.GPU) {
                    throw BackplaneException.internal("model '" + r.modelName() + "' returned output '" + t.name()
                            + "' in GPU memory; the http frontend needs host tensors");
                }
                g.writeFieldName(t.name());
                TensorJson.writeValue(g, t);
            }
            g.writeEndObject();
        } catch (IOException e) {
            buf.release();
            throw new UncheckedIOException(e);
        }
        return buf;
    }
}
