package io.backplane.plugin.grpc;

import static io.backplane.plugin.grpc.GrpcCalls.EMPTY_FINAL;
import static io.backplane.plugin.grpc.GrpcCalls.FINAL_RESPONSE;
import static io.backplane.plugin.grpc.GrpcCalls.READY;
import static io.backplane.plugin.grpc.GrpcCalls.flag;
import static io.backplane.plugin.grpc.GrpcCalls.message;
import static io.backplane.plugin.grpc.GrpcCalls.status;

import io.backplane.spi.RequestTrace;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.MemoryReservation;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import org.jspecify.annotations.Nullable;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One ModelStreamInfer call: any number of requests in flight, responses interleaved as they
 * come. Every response carries {@code triton_final_response} (true on the one that ends its
 * request); with the request parameter {@code triton_enable_empty_final_response=true} a
 * request that ends without a last response (a decoupled model's empty FINAL) gets an empty
 * response saying so. Errors go into the stream as {@code error_message}, or, when the call
 * carries the header {@code triton_grpc_error: true}, the first error ends the whole stream
 * with its gRPC status, cancels the open requests and drops everything after it (Triton's
 * semantics for both).
 */
final class StreamSession implements StreamObserver<ModelInferRequest> {
    private static final Logger log = LoggerFactory.getLogger(StreamSession.class);

    private final InferCalls owner;
    private final StreamObserver<ModelStreamInferResponse> out;
    private final boolean grpcError;
    private final Set<RequestHandle> open = ConcurrentHashMap.newKeySet();
    private boolean halfClosed;
    private boolean finished;
    private int inFlight;

    private final @Nullable String traceParent;

    /** The call's flow control; null when the observer is not a server call's (tests). */
    private final @Nullable ServerCallStreamObserver<ModelStreamInferResponse> flow;
    /** Stages handed out by {@link #ready()} while the call was not ready: completed by the one on-ready handler or at the end. */
    private final Queue<CompletableFuture<Void>> waiting = new ConcurrentLinkedQueue<>();
    private volatile boolean over;

    StreamSession(InferCalls owner, StreamObserver<ModelStreamInferResponse> out, boolean grpcError, @Nullable String traceParent) {
        this.owner = owner;
        this.out = out;
        this.grpcError = grpcError;
        this.traceParent = traceParent;
        // Must be set while the call starts (here, inside modelStreamInfer): one handler for the whole call.
        this.flow = out instanceof ServerCallStreamObserver<ModelStreamInferResponse> sco ? sco : null;
        if (flow != null) {
            flow.setOnReadyHandler(this::wakeReady);
        }
    }

    /**
     * Flow control (DESIGN P9): completes when gRPC's outbound buffer for this call is below its
     * threshold, or the stream ended. A waiter is queued before {@code isReady} is read again,
     * and the handler drains the queue after gRPC turned ready, so no wake-up is lost.
     */
    CompletionStage<Void> ready() {
        ServerCallStreamObserver<ModelStreamInferResponse> f = flow;
        if (f == null || over || f.isCancelled() || f.isReady()) {
            return READY;
        }
        CompletableFuture<Void> w = new CompletableFuture<>();
        waiting.add(w);
        if (over || f.isCancelled() || f.isReady()) {
            wakeReady();
        }
        return w;
    }

    private void wakeReady() {
        CompletableFuture<Void> w;
        while ((w = waiting.poll()) != null) {
            w.complete(null);
        }
    }

    /** The stream ended (completed, failed or cancelled): nothing waits for it any more. */
    private void streamOver() {
        over = true;
        wakeReady();
    }

    @Override
    public void onNext(ModelInferRequest req) {
        synchronized (this) {
            if (finished) {
                return; // the stream ended with an error status: what the client still sends is dropped
            }
            inFlight++;
        }
        MemoryReservation held;
        try {
            held = owner.reserve(req);
        } catch (Throwable t) {
            fail(t, ModelStreamInferResponse.newBuilder().setErrorMessage(message(t))
                    .setInferResponse(ModelInferResponse.newBuilder().setId(req.getId())).build());
            ended(null, null);
            return;
        }
        ProtoTensors.Parsed parsed;
        try {
            parsed = ProtoTensors.toRequest(req, owner.shm);
        } catch (Throwable t) {
            held.close();
            // Refused before it ran: Triton answers with the id only.
            fail(t, ModelStreamInferResponse.newBuilder().setErrorMessage(message(t))
                    .setInferResponse(ModelInferResponse.newBuilder().setId(req.getId())).build());
            ended(null, null);
            return;
        }
        InferParameter efr = req.getParametersMap().get(EMPTY_FINAL);
        RequestTrace trace = owner.tracer.start(req.getModelName(), traceParent);
        Observer obs = new Observer(req, parsed, efr != null && efr.getBoolParam(), trace, held);
        RequestHandle h = owner.service.stream(trace == RequestTrace.NONE ? parsed.request() : parsed.request().toBuilder().trace(trace).build(), obs);
        obs.handle = h;
        if (!h.isDone()) {
            open.add(h);
            boolean stop;
            synchronized (this) {
                stop = finished;
            }
            if (h.isDone()) {
                open.remove(h);
            } else if (stop) {
                h.cancel();
            }
        }
    }

    @Override
    public void onError(Throwable t) {
        // The client cancelled or the connection broke: cancel what is still running.
        synchronized (this) {
            finished = true;
        }
        streamOver();
        cancelOpen();
    }

    @Override
    public void onCompleted() {
        synchronized (this) {
            halfClosed = true;
            maybeFinish();
        }
    }

    private void cancelOpen() {
        for (RequestHandle h : open) {
            h.cancel();
        }
    }

    private void maybeFinish() {
        if (halfClosed && inFlight == 0 && !finished) {
            finished = true;
            try {
                out.onCompleted();
            } catch (RuntimeException e) {
                log.debug("stream already closed: {}", e.toString());
            }
            streamOver();
        }
    }

    private synchronized void send(ModelStreamInferResponse r) {
        if (finished) {
            return;
        }
        try {
            out.onNext(r);
        } catch (RuntimeException e) {
            log.debug("stream response dropped, the call is closed: {}", e.toString());
        }
    }

    /** An error: in the stream as {@code inStream}, or with triton_grpc_error as the status that ends the stream. */
    private void fail(Throwable t, ModelStreamInferResponse inStream) {
        if (!grpcError) {
            send(inStream);
            return;
        }
        synchronized (this) {
            if (finished) {
                return;
            }
            finished = true;
            try {
                out.onError(status(t));
            } catch (RuntimeException e) {
                log.debug("stream already closed: {}", e.toString());
            }
        }
        streamOver();
        cancelOpen();
    }

    private synchronized void ended(@Nullable RequestHandle h, ProtoTensors.@Nullable Parsed parsed) {
        if (h != null) {
            open.remove(h);
        }
        if (parsed != null) {
            parsed.release();
        }
        inFlight--;
        maybeFinish();
    }

    private final class Observer implements ResponseObserver {
        private final ModelInferRequest req;
        private final ProtoTensors.Parsed parsed;
        private final boolean emptyFinal;
        private final RequestTrace trace;
        private final MemoryReservation held;
        private volatile @Nullable Throwable failure;
        volatile @Nullable RequestHandle handle;

        Observer(ModelInferRequest req, ProtoTensors.Parsed parsed, boolean emptyFinal, RequestTrace trace, MemoryReservation held) {
            this.req = req;
            this.held = held;
            this.parsed = parsed;
            this.emptyFinal = emptyFinal;
            this.trace = trace;
        }

        @Override
        public void onResponse(InferenceResponse response) {
            respond(response, false);
        }

        @Override
        public CompletionStage<Void> ready() {
            return StreamSession.this.ready();
        }

        @Override
        public void onLastResponse(InferenceResponse response) {
            try {
                respond(response, true);
            } finally {
                done();
            }
        }

        @Override
        public void onComplete() {
            if (emptyFinal) {
                send(ModelStreamInferResponse.newBuilder().setInferResponse(echo().putParameters(FINAL_RESPONSE, flag(true))).build());
            }
            done();
        }

        @Override
        public void onError(BackplaneException error) {
            failure = error;
            failed(error, true);
            done();
        }

        private void respond(InferenceResponse response, boolean last) {
            BackplaneException e = response.error();
            if (e != null) {
                failed(e, last);
                return;
            }
            ModelInferResponse r;
            try {
                r = ProtoTensors.toResponse(response, parsed.shmOutputs()).toBuilder().putParameters(FINAL_RESPONSE, flag(last)).build();
            } catch (RuntimeException x) {
                failed(x, last);
                return;
            }
            send(ModelStreamInferResponse.newBuilder().setInferResponse(r).build());
        }

        /** A failed response: Triton's error message and the request's id, model and version. */
        private void failed(Throwable t, boolean last) {
            fail(t, ModelStreamInferResponse.newBuilder().setErrorMessage(message(t))
                    .setInferResponse(echo().putParameters(FINAL_RESPONSE, flag(last))).build());
        }

        private ModelInferResponse.Builder echo() {
            return ModelInferResponse.newBuilder().setModelName(req.getModelName()).setModelVersion(req.getModelVersion()).setId(req.getId());
        }

        private void done() {
            held.close();
            trace.finish(failure);
            ended(handle, parsed);
        }
    }
}

