package io.backplane.spi.metrics;

import static java.util.Objects.requireNonNull;

import java.util.List;
import java.util.Map;

/**
 * The state of one custom family at one moment, for exporters.
 *
 * @param series one entry per open labelled series, in creation order
 */
public record MetricFamilySnapshot(String name, String description, MetricKind kind, List<Series> series) {
    public MetricFamilySnapshot {
        requireNonNull(name, "name is null");
        requireNonNull(description, "description is null");
        requireNonNull(kind, "kind is null");
        series = List.copyOf(series);
    }

    /**
     * One labelled series.
     *
     * @param value a counter's or gauge's value; a histogram's sum
     * @param buckets a histogram's upper bounds (without +Inf); empty otherwise
     * @param bucketCounts a histogram's cumulative count per bucket, then the total count (+Inf)
     */
    public record Series(Map<String, String> labels, double value, List<Double> buckets, List<Long> bucketCounts) {
        public Series {
            labels = Map.copyOf(labels);
            buckets = List.copyOf(buckets);
            bucketCounts = List.copyOf(bucketCounts);
        }
    }
}
