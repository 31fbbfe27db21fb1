package io.backplane.bench;

import java.util.List;
import java.util.Locale;

/** What a bench run measured: one {@link Level} per concurrency level. */
public record BenchResult(String target, String model, List<Level> levels) {
    public BenchResult {
        levels = List.copyOf(levels);
    }

    /**
     * One concurrency level.
     *
     * @param requests successful requests measured
     * @param errors failed requests measured
     * @param throughput successful requests per second
     * @param p50Micros median latency in µs; p90 and p99 likewise
     * @param serverQueueMicros the server's mean queue time per successful request during the
     *     level, from its statistics extension (NaN when it does not serve statistics)
     * @param serverComputeMicros the same for compute time
     * @param firstError the first error's message, or empty
     */
    public record Level(int concurrency, long requests, long errors, double seconds, double throughput, double p50Micros,
            double p90Micros, double p99Micros, double meanMicros, double serverQueueMicros, double serverComputeMicros, String firstError) {
    }

    /** A plain-text table. */
    public String table() {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%s, model %s%n", target, model));
        b.append(String.format(Locale.ROOT, "%11s %12s %10s %10s %10s %10s %12s %12s %8s%n", "concurrency", "requests/s", "p50 µs", "p90 µs",
                "p99 µs", "mean µs", "srv queue µs", "srv comp µs", "errors"));
        for (Level l : levels) {
            b.append(String.format(Locale.ROOT, "%11d %12.0f %10.1f %10.1f %10.1f %10.1f %12s %12s %8d%n", l.concurrency(), l.throughput(),
                    l.p50Micros(), l.p90Micros(), l.p99Micros(), l.meanMicros(), micros(l.serverQueueMicros()), micros(l.serverComputeMicros()),
                    l.errors()));
            if (!l.firstError().isEmpty()) {
                b.append("            first error: ").append(l.firstError()).append('\n');
            }
        }
        return b.toString();
    }

    private static String micros(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.1f", v);
    }
}
