package io.backplane.spi.metrics;

import java.util.Map;

/**
 * One reference to a labelled series of a {@link MetricFamily}. Thread-safe. After
 * {@link #close()} updates throw {@link io.backplane.spi.BackplaneException} UNAVAILABLE; the
 * series disappears from {@code /metrics} when every reference to it is closed.
 */
public interface Metric extends AutoCloseable {
    Map<String, String> labels();

    /**
     * Adds {@code delta} (COUNTER: ≥ 0; GAUGE: any finite value).
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT for a negative counter delta,
     *     a non-finite value or a HISTOGRAM
     */
    void increment(double delta);

    /**
     * Sets the value (GAUGE only).
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT for a COUNTER or HISTOGRAM
     */
    void set(double value);

    /**
     * Records an observation (HISTOGRAM only).
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT for a COUNTER or GAUGE
     */
    void observe(double value);

    /** The current value: a counter's or gauge's value, a histogram's sum of observations. */
    double value();

    /** Releases this reference. Idempotent. */
    @Override
    void close();
}
