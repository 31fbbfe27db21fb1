package io.backplane.plugin.metrics;

import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.FrontendFactory;

/**
 * The {@code metrics} plugin: Prometheus text at {@code GET /metrics}. Options (all optional):
 * {@code host} (default {@code 0.0.0.0}), {@code port} (default 8002, 0 picks a free one).
 * Meter names are listed on {@link MetricsListener}.
 */
public final class MetricsFrontendFactory implements FrontendFactory {
    public static final String NAME = "metrics";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Frontend create(FrontendContext context) {
        return new MetricsFrontend(context.service(), context.options());
    }
}
