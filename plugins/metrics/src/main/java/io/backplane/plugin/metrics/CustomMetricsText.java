package io.backplane.plugin.metrics;

import io.backplane.spi.metrics.MetricFamilySnapshot;
import io.backplane.spi.metrics.MetricKind;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Renders the backends' custom metric families (Triton's custom metrics) in the Prometheus text
 * format, to follow the built-in series on {@code /metrics}.
 */
final class CustomMetricsText {
    private CustomMetricsText() {
    }

    static String render(List<MetricFamilySnapshot> families) {
        StringBuilder sb = new StringBuilder();
        for (MetricFamilySnapshot f : families) {
            sb.append("# HELP ").append(f.name()).append(' ').append(escapeHelp(f.description())).append('\n');
            sb.append("# TYPE ").append(f.name()).append(' ').append(f.kind().name().toLowerCase(Locale.ROOT)).append('\n');
            for (MetricFamilySnapshot.Series s : f.series()) {
                if (f.kind() != MetricKind.HISTOGRAM) {
                    sb.append(f.name()).append(labels(s.labels(), null)).append(' ').append(number(s.value())).append('\n');
                    continue;
                }
                List<Double> b = s.buckets();
                List<Long> c = s.bucketCounts();
                for (int i = 0; i < c.size(); i++) {
                    String le = i < b.size() ? number(b.get(i)) : "+Inf";
                    sb.append(f.name()).append("_bucket").append(labels(s.labels(), le)).append(' ').append(c.get(i)).append('\n');
                }
                sb.append(f.name()).append("_sum").append(labels(s.labels(), null)).append(' ').append(number(s.value())).append('\n');
                sb.append(f.name()).append("_count").append(labels(s.labels(), null)).append(' ').append(c.isEmpty() ? 0 : c.get(c.size() - 1))
                        .append('\n');
            }
        }
        return sb.toString();
    }

    private static String labels(Map<String, String> labels, @org.jspecify.annotations.Nullable String le) {
        if (labels.isEmpty() && le == null) {
            return "";
        }
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, String> e : new TreeMap<>(labels).entrySet()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append(e.getKey()).append("=\"").append(escapeValue(e.getValue())).append('"');
        }
        if (le != null) {
            sb.append(first ? "" : ",").append("le=\"").append(le).append('"');
        }
        return sb.append('}').toString();
    }

    private static String number(double v) {
        if (v == Math.rint(v) && !Double.isInfinite(v) && Math.abs(v) < 1e15) {
            return Long.toString((long) v);
        }
        return Double.toString(v);
    }

    private static String escapeHelp(String s) {
        return s.replace("\\", "\\\\").replace("\n", "\\n");
    }

    private static String escapeValue(String s) {
        return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\"", "\\\"");
    }
}
