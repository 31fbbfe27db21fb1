package io.backplane.plugin.grpc;

import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;
import io.backplane.spi.metrics.MetricRegistry;
import org.jspecify.annotations.Nullable;

/**
 * The {@code grpc} frontend: {@code inference.GRPCInferenceService}. Options (all optional):
 * {@code host} (default {@code 0.0.0.0}), {@code port} (default 8001, 0 picks a free one),
 * {@code max_message_bytes} (largest inbound message, default 64 MiB; larger ones fail with
 * RESOURCE_EXHAUSTED), {@code threads} (event loops, default available processors),
 * {@code drain_timeout_ms} (how long close waits for open calls, default 5000); keep-alive,
 * connection-lifetime, restricted-protocol and TLS options as listed by {@code GrpcOptions}
 * and docs/protocols.md.
 */
public final class GrpcFrontendFactory implements FrontendFactory {
    public static final String NAME = "grpc";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Frontend create(FrontendContext context) {
        GrpcOptions options = GrpcOptions.parse(context.options());
        return new GrpcFrontend(context.service(), options, context.logControl(),
                context.shared(io.backplane.protocol.SystemSharedMemory.class, () -> new io.backplane.protocol.SystemSharedMemory(context.deviceSharedMemory())),
                context.tracer(), metrics(context));
    }

    /** The host's metrics, or null when it gives frontends none (then malformed messages are not counted). */
    private static @Nullable MetricRegistry metrics(FrontendContext context) {
        try {
            return context.metrics();
        } catch (UnsupportedOperationException e) {
            return null;
        }
    }
}
