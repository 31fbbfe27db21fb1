package io.backplane.core.composition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.internal.CustomMetrics;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.metrics.Metric;
import io.backplane.spi.metrics.MetricFamily;
import io.backplane.spi.metrics.MetricFamilySnapshot;
import io.backplane.spi.metrics.MetricKind;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The custom-metrics registry behind {@code ModelContext.metrics()}: Triton's duplicate rules, kinds, reference counting. */
class CustomMetricsTest {
    private final CustomMetrics registry = new CustomMetrics();

    @Test
    void sameNameSameKind_sharesTheFamily_firstDescriptionKept() {
        var a = registry.scope("model 'a'");
        var b = registry.scope("model 'b'");
        MetricFamily f1 = a.family("requests", "first", MetricKind.COUNTER);
        MetricFamily f2 = b.family("requests", "second", MetricKind.COUNTER);
        assertEquals("first", f2.description());
        Metric m1 = f1.metric(Map.of("k", "v"));
        Metric m2 = f2.metric(Map.of("k", "v"));
        m1.increment(7.5);
        assertEquals(7.5, m2.value());
        f1.close();
        m1.close();
        assertEquals(List.of("requests"), registry.snapshot().stream().map(MetricFamilySnapshot::name).toList(), "f2 and m2 still hold it");
        b.close();
        assertEquals(List.of(), registry.snapshot(), "the scope closed what it handed out");
        a.close();
    }

    @Test
    void sameNameOtherKind_rejected() {
        var s = registry.scope("m");
        s.family("x", "d", MetricKind.COUNTER);
        BackplaneException e = assertThrows(BackplaneException.class, () -> s.family("x", "d", MetricKind.GAUGE));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("already exists with kind COUNTER"), e.getMessage());
        s.close();
    }

    @Test
    void counter_refusesNegativeIncrementAndSet_gaugeTakesBoth() {
        var s = registry.scope("m");
        Metric c = s.family("c", "d", MetricKind.COUNTER).metric(Map.of());
        assertThrows(BackplaneException.class, () -> c.increment(-1));
        assertThrows(BackplaneException.class, () -> c.set(3));
        assertThrows(BackplaneException.class, () -> c.observe(3));
        Metric g = s.family("g", "d", MetricKind.GAUGE).metric(Map.of());
        g.set(5);
        g.increment(-1.5);
        assertEquals(3.5, g.value());
        s.close();
        assertThrows(BackplaneException.class, () -> g.set(1), "closed with its scope");
    }

    @Test
    void histogram_countsIntoCumulativeBuckets() {
        var s = registry.scope("m");
        MetricFamily h = s.family("h", "d", MetricKind.HISTOGRAM);
        Metric infOnly = h.metric(Map.of("only", "inf"));
        infOnly.observe(7);
        assertThrows(BackplaneException.class, () -> h.metric(Map.of(), List.of(2.0, 1.0)), "increasing buckets");
        Metric m = h.metric(Map.of("a", "b"), List.of(1.0, 4.0));
        for (double v : new double[] {0.5, 1, 3, 9}) {
            m.observe(v);
        }
        List<MetricFamilySnapshot.Series> all = registry.snapshot().getFirst().series();
        assertEquals(List.of(1L), all.get(0).bucketCounts(), "no boundaries: only the +Inf bucket (Triton's buckets=[])");
        assertEquals(7.0, all.get(0).value());
        MetricFamilySnapshot.Series series = all.get(1);
        assertEquals(List.of(2L, 3L, 4L), series.bucketCounts());
        assertEquals(13.5, series.value());
        s.close();
    }

    @Test
    void badNames_rejectedNamingTheValue() {
        var s = registry.scope("m");
        BackplaneException e = assertThrows(BackplaneException.class, () -> s.family("1bad", "d", MetricKind.GAUGE));
        assertTrue(e.getMessage().contains("'1bad'"), e.getMessage());
        MetricFamily f = s.family("ok", "d", MetricKind.GAUGE);
        BackplaneException l = assertThrows(BackplaneException.class, () -> f.metric(Map.of("a-b", "v")));
        assertTrue(l.getMessage().contains("'a-b'"), l.getMessage());
        s.close();
    }
}
