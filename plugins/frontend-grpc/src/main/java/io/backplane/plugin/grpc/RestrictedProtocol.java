package io.backplane.plugin.grpc;

import io.backplane.protocol.RestrictedApis;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;

/**
 * Refuses calls to restricted API groups that lack the group's header (Triton's
 * {@code --grpc-restricted-protocol}): the call ends at once with UNAVAILABLE and a message naming
 * the header, before the service sees it. The group of a method is {@link RestrictedApis#grpcApi}, and
 * {@code health} for the standard {@code grpc.health.v1.Health} (Triton restricts its Check with
 * the {@code health} group). As in Triton, a group restricted with {@code <key>=<value>} wants the
 * call header {@code triton-grpc-protocol-<key>} ({@link RestrictedApis#GRPC_HEADER_PREFIX}).
 */
final class RestrictedProtocol implements ServerInterceptor {
    private final RestrictedApis restricted;

    RestrictedProtocol(RestrictedApis restricted) {
        this.restricted = restricted;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        if (restricted.isEmpty()) {
            return next.startCall(call, headers);
        }
        String refusal = restricted.refusal(api(call.getMethodDescriptor()), RestrictedApis.GRPC_HEADER_PREFIX,
                h -> headers.get(Metadata.Key.of(h, Metadata.ASCII_STRING_MARSHALLER)));
        if (refusal == null) {
            return next.startCall(call, headers);
        }
        call.close(Status.UNAVAILABLE.withDescription(refusal.replace("This API", "This protocol")), new Metadata());
        return new ServerCall.Listener<>() {
        };
    }

    /** The group of a method: the standard health service is Triton's {@code health} group too, as Triton restricts its Check. */
    static RestrictedApis.Api api(MethodDescriptor<?, ?> method) {
        if (HealthGrpc.SERVICE_NAME.equals(method.getServiceName())) {
            return RestrictedApis.Api.HEALTH;
        }
        String bare = method.getBareMethodName();
        return RestrictedApis.grpcApi(bare == null ? "" : bare);
    }
}
