package io.backplane.plugin.grpc;

import static io.backplane.plugin.grpc.GrpcCalls.status;

import io.backplane.spi.host.RequestTracer;
import io.backplane.spi.RequestTrace;
import io.backplane.protocol.SystemSharedMemory;
import io.backplane.protocol.inference.ModelInferRequest;
import io.backplane.protocol.inference.ModelInferResponse;
import io.backplane.protocol.inference.ModelStreamInferResponse;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.MemoryReservation;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.grpc.netty.shaded.io.netty.util.concurrent.EventExecutor;
import io.grpc.netty.shaded.io.netty.util.internal.ThreadExecutorMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code ModelInfer} and {@code ModelStreamInfer}: requests go to the host without blocking a
 * transport thread. A {@code ModelInfer} reply is built and written on the connection's event loop
 * (one hand-over from the thread that ends the request); stream responses go from that thread.
 */
final class InferCalls {
    private static final Logger log = LoggerFactory.getLogger(InferCalls.class);

    final InferenceService service;
    final SystemSharedMemory shm;
    final RequestTracer tracer;

    InferCalls(InferenceService service, SystemSharedMemory shm, RequestTracer tracer) {
        this.service = service;
        this.shm = shm;
        this.tracer = tracer;
    }

    void modelInfer(ModelInferRequest req, StreamObserver<ModelInferResponse> obs) {
        CompletableFuture<InferenceResponse> f;
        ProtoTensors.Parsed parsed;
        MemoryReservation held;
        try {
            held = reserve(req);
        } catch (Throwable t) {
            obs.onError(status(t));
            return;
        }
        try {
            parsed = ProtoTensors.toRequest(req, shm);
        } catch (Throwable t) {
            held.close();
            obs.onError(status(t));
            return;
        }
        RequestTrace trace = tracer.start(req.getModelName(), TritonHeaders.TRACEPARENT.get());
        try {
            f = service.infer(trace == RequestTrace.NONE ? parsed.request() : parsed.request().toBuilder().trace(trace).build());
        } catch (Throwable t) {
            held.close();
            parsed.release();
            trace.finish(t);
            obs.onError(status(t));
            return;
        }
        if (obs instanceof ServerCallStreamObserver<ModelInferResponse> sco && !f.isDone()) {
            sco.setOnCancelHandler(() -> f.cancel(false));
        }
        // One callback, in this order: the trace ends and the memory is returned before the reply goes out, so a
        // client holding its answer finds a finished trace (two callbacks on one future run in no set order).
        // It runs on the connection's event loop (the call came in on it: direct executor), so the model's thread hands the
        // reply over once; sending the message and then the trailers from the model's thread woke the loop twice a call.
        f.whenCompleteAsync((r, e) -> {
            held.close();
            try {
                trace.finish(e != null ? e : r.error());
            } catch (RuntimeException bad) {
                log.warn("the request trace failed to finish; the reply is still sent", bad);
            }
            if (e != null) {
                parsed.release();
                obs.onError(status(e));
                return;
            }
            ModelInferResponse resp;
            try {
                if (r.error() != null) {
                    throw r.error();
                }
                resp = ProtoTensors.toResponse(r, parsed.shmOutputs());
            } catch (Throwable t) {
                obs.onError(status(t));
                return;
            } finally {
                parsed.release();
            }
            try {
                obs.onNext(resp);
                obs.onCompleted();
            } catch (StatusRuntimeException cancelled) {
                log.debug("client went away before its response: {}", cancelled.getStatus());
            }
        }, loopOrCaller());
    }

    /** The event loop of the calling transport thread, falling back to the completing thread once it refuses work (shutdown). */
    private static Executor loopOrCaller() {
        EventExecutor loop = ThreadExecutorMap.currentExecutor();
        if (loop == null) {
            return Runnable::run;
        }
        return task -> {
            try {
                loop.execute(task);
            } catch (RejectedExecutionException shuttingDown) {
                task.run();
            }
        };
    }

    StreamObserver<ModelInferRequest> modelStreamInfer(StreamObserver<ModelStreamInferResponse> obs) {
        return new StreamSession(this, obs, TritonHeaders.GRPC_ERROR.get(), TritonHeaders.TRACEPARENT.get());
    }

    /**
     * Takes the message's size from the host's memory budget (O1) before its tensors are copied out
     * of it; released when the request ends. gRPC has read the message by now: the frontend's
     * {@code max_message_bytes} and connection limit bound what is read before this check.
     */
    MemoryReservation reserve(ModelInferRequest req) {
        return service.reserveMemory(req.getSerializedSize(), "a gRPC inference request to model '" + req.getModelName() + "'");
    }

}
