package io.backplane.plugin.grpc;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;

/**
 * Reads the call headers Triton gives a meaning to and hands them to the service through the
 * call's {@link Context}: {@code triton_grpc_error: true} ({@link #GRPC_ERROR}) makes the first
 * error of a {@code ModelStreamInfer} call end the stream with a gRPC status.
 */
final class TritonHeaders implements ServerInterceptor {
    /** Whether the call asked for errors as a gRPC status ({@code triton_grpc_error: true}, exactly as Triton compares it). */
    static final Context.Key<Boolean> GRPC_ERROR = Context.keyWithDefault(GrpcInferenceService.GRPC_ERROR_HEADER, false);

    private static final Metadata.Key<String> GRPC_ERROR_KEY = Metadata.Key.of(GrpcInferenceService.GRPC_ERROR_HEADER,
            Metadata.ASCII_STRING_MARSHALLER);

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        if (!"true".equals(headers.get(GRPC_ERROR_KEY))) {
            return next.startCall(call, headers);
        }
        return Contexts.interceptCall(Context.current().withValue(GRPC_ERROR, true), call, headers, next);
    }
}
