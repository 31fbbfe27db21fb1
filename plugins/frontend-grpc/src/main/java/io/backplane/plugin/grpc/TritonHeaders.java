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
 * error of a {@code ModelStreamInfer} call end the stream with a gRPC status; {@code traceparent}
 * ({@link #TRACEPARENT}) is the W3C trace context its requests are traced under.
 */
final class TritonHeaders implements ServerInterceptor {
    /** Whether the call asked for errors as a gRPC status ({@code triton_grpc_error: true}, exactly as Triton compares it). */
    static final Context.Key<Boolean> GRPC_ERROR = Context.keyWithDefault(GrpcCalls.GRPC_ERROR_HEADER, false);

    /** The W3C {@code traceparent} the call carries (trace extension), or null. */
    static final Context.Key<String> TRACEPARENT = Context.key("traceparent");

    private static final Metadata.Key<String> TRACEPARENT_KEY = Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);

    private static final Metadata.Key<String> GRPC_ERROR_KEY = Metadata.Key.of(GrpcCalls.GRPC_ERROR_HEADER,
            Metadata.ASCII_STRING_MARSHALLER);

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        boolean grpcError = "true".equals(headers.get(GRPC_ERROR_KEY));
        String traceParent = headers.get(TRACEPARENT_KEY);
        if (!grpcError && traceParent == null) {
            return next.startCall(call, headers);
        }
        Context c = Context.current();
        if (grpcError) {
            c = c.withValue(GRPC_ERROR, true);
        }
        if (traceParent != null) {
            c = c.withValue(TRACEPARENT, traceParent);
        }
        return Contexts.interceptCall(c, call, headers, next);
    }
}
