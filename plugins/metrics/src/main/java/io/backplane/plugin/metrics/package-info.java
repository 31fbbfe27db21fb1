/**
 * Prometheus metrics for a Backplane host: a {@link io.backplane.spi.host.HostListener} feeding
 * Micrometer meters, served as Prometheus text at {@code /metrics} on its own port. Discovered as
 * the {@code metrics} {@link io.backplane.spi.host.FrontendFactory}.
 */
@NullMarked
package io.backplane.plugin.metrics;

import org.jspecify.annotations.NullMarked;
