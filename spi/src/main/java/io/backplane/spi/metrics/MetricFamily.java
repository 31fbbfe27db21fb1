package io.backplane.spi.metrics;

import java.util.List;
import java.util.Map;

/**
 * One reference to a host-wide metric family. Thread-safe. After {@link #close()} its metrics
 * stay usable until they are closed themselves; new metrics can no longer be created through it.
 */
public interface MetricFamily extends AutoCloseable {
    String name();

    /** The description the family was first created with. */
    String description();

    MetricKind kind();

    /**
     * A labelled series of this family without buckets (a COUNTER or GAUGE; for a HISTOGRAM, one
     * with only the +Inf bucket). Equal labels give the same series.
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT for a bad label name;
     *     UNAVAILABLE after {@link #close()}
     */
    default Metric metric(Map<String, String> labels) {
        return metric(labels, List.of());
    }

    /**
     * A labelled series; {@code buckets} (strictly increasing finite upper bounds, without +Inf)
     * are for a HISTOGRAM family (empty: only the +Inf bucket, as in Triton) and must be empty
     * otherwise.
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT for wrong buckets or a bad
     *     label name; UNAVAILABLE after {@link #close()}
     */
    Metric metric(Map<String, String> labels, List<Double> buckets);

    /** Releases this reference. Idempotent. */
    @Override
    void close();
}
