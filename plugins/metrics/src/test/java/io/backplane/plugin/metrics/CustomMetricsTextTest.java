package io.backplane.plugin.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.metrics.MetricFamilySnapshot;
import io.backplane.spi.metrics.MetricKind;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Custom families in Prometheus text: HELP/TYPE, sorted escaped labels, histogram buckets, sum and count. */
class CustomMetricsTextTest {
    @Test
    void render_counterAndHistogram_prometheusText() {
        String text = CustomMetricsText.render(List.of(
                new MetricFamilySnapshot("c_total", "a \"counter\"\nline", MetricKind.COUNTER,
                        List.of(new MetricFamilySnapshot.Series(Map.of("b", "x\"y", "a", "1"), 2.5, List.of(), List.of()))),
                new MetricFamilySnapshot("h", "hist", MetricKind.HISTOGRAM,
                        List.of(new MetricFamilySnapshot.Series(Map.of(), 7, List.of(1.0, 4.0), List.of(1L, 2L, 3L))))));
        assertEquals("""
                # HELP c_total a "counter"\\nline
                # TYPE c_total counter
                c_total{a="1",b="x\\"y"} 2.5
                # HELP h hist
                # TYPE h histogram
                h_bucket{le="1"} 1
                h_bucket{le="4"} 2
                h_bucket{le="+Inf"} 3
                h_sum 7
                h_count 3
                """, text);
    }
}
