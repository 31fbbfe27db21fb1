package io.backplane.spi.metrics;

/**
 * Where a backend creates custom metric families; obtained from
 * {@link io.backplane.spi.ModelContext#metrics()}. Implemented by the core. Thread-safe.
 */
public interface MetricRegistry {
    /**
     * Creates a family, or returns a new reference to the existing family of that name when its
     * kind is the same (the first description is kept). Close the returned reference when done;
     * the host also closes it when the model version that created it unloads.
     *
     * @param name a Prometheus metric name ({@code [a-zA-Z_:][a-zA-Z0-9_:]*})
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT for a bad name, or a name that
     *     exists with another kind
     */
    MetricFamily family(String name, String description, MetricKind kind);
}
