/**
 * Custom metrics that any backend can publish (Triton's {@code TRITONSERVER_MetricFamily} and
 * python_backend's {@code pb_utils.MetricFamily}): a backend gets a
 * {@link io.backplane.spi.metrics.MetricRegistry} from
 * {@link io.backplane.spi.ModelContext#metrics()}, creates families and labelled metrics in it,
 * and the host's metrics plugin exports them on {@code /metrics} beside the built-in series
 * (reading them through {@link io.backplane.spi.host.InferenceService#customMetrics()}).
 *
 * <h2>Names and duplicates (Triton's rules)</h2>
 * Family names are host-wide. Creating a family whose name exists with the same kind returns
 * the existing family (its first description is kept); with another kind it fails with
 * {@link io.backplane.spi.ErrorCode#INVALID_ARGUMENT}. Two metrics of one family with equal labels
 * are the same series. A family or metric lives while any reference to it is open and while the
 * model version that created it is loaded.
 */
@NullMarked
package io.backplane.spi.metrics;

import org.jspecify.annotations.NullMarked;
