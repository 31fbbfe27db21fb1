package io.backplane.spi.metrics;

/** The kind of a metric family, as Prometheus and Triton know them. */
public enum MetricKind {
    /** A value that only grows: {@link Metric#increment} with a value ≥ 0. */
    COUNTER,
    /** A value that goes up and down: {@link Metric#increment} and {@link Metric#set}. */
    GAUGE,
    /** Observations counted into buckets: {@link Metric#observe}. */
    HISTOGRAM
}
