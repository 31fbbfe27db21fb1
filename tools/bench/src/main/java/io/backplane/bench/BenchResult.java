package io.backplane.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What a bench run measured: one {@link Level} per concurrency level, as a table, CSV or JSON.
 *
 * @param target where the requests went ({@link BenchOptions#targetName()})
 * @param model the model measured
 * @param streaming whether requests went over a stream (a decoupled model): then each level also
 *     has the time to the first response and between responses
 * @param levels one per concurrency level, in the order run
 */
public record BenchResult(String target, String model, boolean streaming, List<Level> levels) {
    public BenchResult {
        levels = List.copyOf(levels);
    }

    /**
     * One concurrency level. Latencies are from sending a request to its last response (its only
     * one for a plain model), in µs; a figure that was not measured is {@code NaN}.
     *
     * @param requests successful requests measured
     * @param errors failed requests measured
     * @param throughput successful requests per second
     * @param firstResponseP50Micros streaming: median time from send to the first response; p99 likewise
     * @param betweenResponsesP50Micros streaming: median time between two responses of a request; p99 likewise
     * @param responses streaming: responses received (successful requests × responses each)
     * @param serverQueueMicros mean time a request waited in the server's queue, from the server's
     *     statistics endpoint ({@code /v2/models/NAME/stats}), when it has one
     * @param serverComputeMicros mean compute time (input, infer, output) per request, likewise
     * @param firstError the first error's message, or empty
     */
    public record Level(int concurrency, long requests, long errors, double seconds, double throughput, double p50Micros,
            double p90Micros, double p95Micros, double p99Micros, double meanMicros, double firstResponseP50Micros,
            double firstResponseP99Micros, double betweenResponsesP50Micros, double betweenResponsesP99Micros, long responses,
            double serverQueueMicros, double serverComputeMicros, String firstError) {

        /** Failed requests as a fraction of all requests measured (0 when none was measured). */
        public double errorRate() {
            long all = requests + errors;
            return all == 0 ? 0 : (double) errors / all;
        }
    }

    /** Whether any level has server-side figures. */
    public boolean hasServerStats() {
        return levels.stream().anyMatch(l -> !Double.isNaN(l.serverQueueMicros()));
    }

    /** A plain-text table. */
    public String table() {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%s, model %s%s%n", target, model, streaming ? " (decoupled: over a stream)" : ""));
        b.append(String.format(Locale.ROOT, "%11s %12s %10s %10s %10s %10s %10s %8s", "concurrency", "requests/s", "p50 µs", "p90 µs", "p95 µs",
                "p99 µs", "mean µs", "errors"));
        if (streaming) {
            b.append(String.format(Locale.ROOT, " %13s %13s %13s %13s", "first p50 µs", "first p99 µs", "between p50", "between p99"));
        }
        boolean server = hasServerStats();
        if (server) {
            b.append(String.format(Locale.ROOT, " %15s %17s", "server queue µs", "server compute µs"));
        }
        b.append('\n');
        for (Level l : levels) {
            b.append(String.format(Locale.ROOT, "%11d %12.0f %10.1f %10.1f %10.1f %10.1f %10.1f %8d", l.concurrency(), l.throughput(), l.p50Micros(),
                    l.p90Micros(), l.p95Micros(), l.p99Micros(), l.meanMicros(), l.errors()));
            if (streaming) {
                b.append(String.format(Locale.ROOT, " %13.1f %13.1f %13.1f %13.1f", l.firstResponseP50Micros(), l.firstResponseP99Micros(),
                        l.betweenResponsesP50Micros(), l.betweenResponsesP99Micros()));
            }
            if (server) {
                b.append(String.format(Locale.ROOT, " %15.1f %17.1f", l.serverQueueMicros(), l.serverComputeMicros()));
            }
            b.append('\n');
            if (!l.firstError().isEmpty()) {
                b.append("            first error: ").append(l.firstError()).append('\n');
            }
        }
        return b.toString();
    }

    private static final List<String> COLUMNS = List.of("target", "model", "concurrency", "requests", "errors", "seconds", "throughput_per_s",
            "p50_us", "p90_us", "p95_us", "p99_us", "mean_us", "first_response_p50_us", "first_response_p99_us", "between_responses_p50_us",
            "between_responses_p99_us", "responses", "server_queue_us", "server_compute_us", "first_error");

    /** CSV: a header line, then one line per level; figures not measured are empty. */
    public String csv() {
        return ResultFormat.csv(COLUMNS, rows(), "%.1f");
    }

    /** JSON: {@code {"target":…, "model":…, "streaming":…, "levels":[{…the CSV columns…}]}}; figures not measured are null. */
    public String json() {
        Map<String, Object> head = new LinkedHashMap<>();
        head.put("target", target);
        head.put("model", model);
        head.put("streaming", streaming);
        return ResultFormat.json(head, rows());
    }

    private List<Map<String, Object>> rows() {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Level l : levels) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("target", target);
            r.put("model", model);
            r.put("concurrency", l.concurrency());
            r.put("requests", l.requests());
            r.put("errors", l.errors());
            r.put("seconds", figure(l.seconds()));
            r.put("throughput_per_s", figure(l.throughput()));
            r.put("p50_us", figure(l.p50Micros()));
            r.put("p90_us", figure(l.p90Micros()));
            r.put("p95_us", figure(l.p95Micros()));
            r.put("p99_us", figure(l.p99Micros()));
            r.put("mean_us", figure(l.meanMicros()));
            r.put("first_response_p50_us", figure(l.firstResponseP50Micros()));
            r.put("first_response_p99_us", figure(l.firstResponseP99Micros()));
            r.put("between_responses_p50_us", figure(l.betweenResponsesP50Micros()));
            r.put("between_responses_p99_us", figure(l.betweenResponsesP99Micros()));
            r.put("responses", streaming ? l.responses() : null);
            r.put("server_queue_us", figure(l.serverQueueMicros()));
            r.put("server_compute_us", figure(l.serverComputeMicros()));
            r.put("first_error", l.firstError().isEmpty() ? null : l.firstError());
            out.add(r);
        }
        return out;
    }

    private static @Nullable Double figure(double v) {
        return Double.isNaN(v) ? null : Math.round(v * 10) / 10.0;
    }
}
