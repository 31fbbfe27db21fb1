package io.backplane.plugin.grpc;

import io.backplane.protocol.ProtocolErrors;
import io.backplane.protocol.inference.InferParameter;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** What every call of the gRPC frontend shares: the unary answer, the gRPC status of an error and the stream's constants. */
final class GrpcCalls {
    private static final Logger log = LoggerFactory.getLogger(GrpcCalls.class);

    private GrpcCalls() {
    }

    /** Answers a unary call with what {@code body} returns, or with the status of what it throws. */
    static <R> void unary(StreamObserver<R> obs, Supplier<R> body) {
        R r;
        try {
            r = body.get();
        } catch (Throwable t) {
            obs.onError(status(t));
            return;
        }
        obs.onNext(r);
        obs.onCompleted();
    }

    static final CompletionStage<Void> READY = CompletableFuture.completedStage(null);

    /** Request parameter: send an empty final response when a request ends without a last response. */
    static final String EMPTY_FINAL = "triton_enable_empty_final_response";
    /** Response parameter: whether this response is the last one of its request. */
    static final String FINAL_RESPONSE = "triton_final_response";
    /** Call header: with {@code true}, the first error in a stream ends it with a gRPC status. */
    static final String GRPC_ERROR_HEADER = "triton_grpc_error";

    static InferParameter flag(boolean value) {
        return InferParameter.newBuilder().setBoolParam(value).build();
    }

    static String message(Throwable t) {
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving a grpc stream request", ProtocolErrors.unwrap(t));
        }
        return String.valueOf(ProtocolErrors.classify(t).getMessage());
    }

    /** The gRPC status for {@code t}: its {@link ProtocolErrors category}'s {@link ErrorCode#grpcStatus()} and message. */
    static StatusRuntimeException status(Throwable t) {
        if (ProtocolErrors.unwrap(t) instanceof StatusRuntimeException s) {
            return s;
        }
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving a grpc call", ProtocolErrors.unwrap(t));
        }
        BackplaneException b = ProtocolErrors.classify(t);
        return Status.fromCode(Status.Code.valueOf(b.code().grpcStatus())).withDescription(b.getMessage()).withCause(b.getCause())
                .asRuntimeException();
    }
}
