package io.backplane.plugin.http;

import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;

/**
 * The {@code http} frontend: the Open Inference Protocol over REST. Options (all optional):
 * {@code host} (default {@code 0.0.0.0}), {@code port} (default 8000, 0 picks a free one),
 * {@code max_body_bytes} (JSON and raw binary bodies, default 64 MiB, larger ones get 400), {@code max_binary_body_bytes}
 * (binary-tensor bodies, limited in practice by the host's memory budget), {@code threads} (event loops,
 * default available processors), {@code drain_timeout_ms} (default 5000); connection limits and
 * timeouts, {@code restricted_api} and TLS ({@code ssl_cert}, {@code ssl_key}) as listed by
 * {@code FrontendOptions} and docs/protocols.md.
 */
public final class HttpFrontendFactory implements FrontendFactory {
    public static final String NAME = "http";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Frontend create(FrontendContext context) {
        return new HttpFrontend(context.service(), FrontendOptions.parse(context.options()), context.logControl(),
                context.shared(io.backplane.protocol.SystemSharedMemory.class, () -> new io.backplane.protocol.SystemSharedMemory(context.deviceSharedMemory())), context.tracer());
    }
}
