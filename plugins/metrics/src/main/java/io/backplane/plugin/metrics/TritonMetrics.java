package io.backplane.plugin.metrics;

import io.backplane.spi.host.HostListener.Outcome;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.ToLongFunction;

/**
 * Triton's inference metric family ({@code nv_inference_*}, and {@code nv_model_load_duration_secs}
 * per loaded model version) under Triton's exact names, which
 * dashboards and alerts written for Triton query. Rendered by hand in the Prometheus text format
 * because Micrometer appends {@code _total} to every counter, and Triton's counters have no such
 * suffix. Series are per model and version and exist only once {@link #series} created them (at
 * load); thread-safe, and the hot path is adder increments.
 */
final class TritonMetrics {
    /** One model version's counters. Durations are in microseconds, as Triton reports them. */
    static final class Series {
        final LongAdder success = new LongAdder();
        final Map<Outcome, LongAdder> failure = new EnumMap<>(Outcome.class);
        final LongAdder inferences = new LongAdder();
        final LongAdder executions = new LongAdder();
        final LongAdder requestUs = new LongAdder();
        final LongAdder queueUs = new LongAdder();
        final LongAdder computeInferUs = new LongAdder();
        final AtomicLong pending = new AtomicLong();
        final LongAdder cacheHits = new LongAdder();
        final LongAdder cacheMisses = new LongAdder();
        final LongAdder cacheHitUs = new LongAdder();
        final LongAdder cacheMissUs = new LongAdder();
        /** The labels of the failure counter, in Triton's order (model, reason, version), around the reason. */
        final String model;
        final String version;

        Series(String model, String version) {
            this.model = "model=\"" + escape(model) + "\"";
            this.version = "version=\"" + escape(version) + "\"";
            for (Outcome o : Outcome.values()) {
                if (o != Outcome.SUCCESS) {
                    failure.put(o, new LongAdder());
                }
            }
        }
    }

    private final Map<String, Series> series = new ConcurrentSkipListMap<>();
    /** Set by the first response-cache event: Triton shows the nv_cache_* family only when the cache is in use. */
    private volatile boolean cacheUsed;

    /** A loaded version's load time; {@code loads} counts the loaded copies (a reload loads the new beside the old). */
    private record LoadTime(double seconds, int loads) {
    }

    /** nv_model_load_duration_secs: one entry per loaded model version, removed when its last copy unloads. */
    private final Map<String, LoadTime> loadTimes = new ConcurrentSkipListMap<>();

    private static String key(String model, String version) {
        return "model=\"" + escape(model) + "\",version=\"" + escape(version) + "\"";
    }

    /** The series of a model version, created if absent. */
    Series series(String model, String version) {
        return series.computeIfAbsent(key(model, version), k -> new Series(model, version));
    }

    /** A version finished loading in {@code nanos}. */
    void loaded(String model, String version, long nanos) {
        series(model, version); // as Triton's, a loaded version's counters are there at 0 before its first request
        loadTimes.merge(key(model, version), new LoadTime(nanos / 1e9, 1), (old, now) -> new LoadTime(now.seconds(), old.loads() + 1));
    }

    /** A loaded copy of a version unloaded; its load time goes when no copy is left, as Triton's does. */
    void unloaded(String model, String version) {
        loadTimes.computeIfPresent(key(model, version), (k, old) -> old.loads() <= 1 ? null : new LoadTime(old.seconds(), old.loads() - 1));
    }

    void ended(Series s, Outcome outcome, long queueNanos, long computeNanos) {
        if (outcome == Outcome.SUCCESS) {
            s.success.increment();
            s.requestUs.add((queueNanos + computeNanos) / 1000);
            s.queueUs.add(queueNanos / 1000);
            s.computeInferUs.add(computeNanos / 1000);
        } else {
            s.failure.get(outcome).increment();
        }
    }

    void cacheLookup(Series s, boolean hit, long lookupNanos) {
        cacheUsed = true;
        if (hit) {
            s.cacheHits.increment();
            s.cacheHitUs.add(lookupNanos / 1000);
        } else {
            s.cacheMisses.increment();
            s.cacheMissUs.add(lookupNanos / 1000);
        }
    }

    void cacheInserted(Series s, long insertNanos) {
        s.cacheMissUs.add(insertNanos / 1000);
    }

    /** Appends the family in the Prometheus text format (version 0.0.4). */
    void render(StringBuilder out) {
        counter(out, "nv_inference_request_success", "Number of successful inference requests, all batch sizes", s -> s.success.sum());
        out.append("# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes\n");
        out.append("# TYPE nv_inference_request_failure counter\n");
        // Triton's label order, which clients that match the text (Triton's QA tests) rely on
        series.forEach((labels, s) -> s.failure.forEach((o, n) -> out.append("nv_inference_request_failure{").append(s.model)
                .append(",reason=\"").append(o.name().toUpperCase(Locale.ROOT)).append("\",").append(s.version).append("} ").append(n.sum())
                .append('\n')));
        counter(out, "nv_inference_count", "Number of inferences performed (does not include cached requests)", s -> s.inferences.sum());
        counter(out, "nv_inference_exec_count", "Number of model executions performed (does not include cached requests)",
                s -> s.executions.sum());
        counter(out, "nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)",
                s -> s.requestUs.sum());
        counter(out, "nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)",
                s -> s.queueUs.sum());
        counter(out, "nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds (does not include cached requests)",
                s -> 0);
        counter(out, "nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not include cached requests)",
                s -> s.computeInferUs.sum());
        counter(out, "nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds (does not include cached requests)",
                s -> 0);
        if (cacheUsed) {
            counter(out, "nv_cache_num_hits_per_model", "Number of cache hits per model", s -> s.cacheHits.sum());
            counter(out, "nv_cache_num_misses_per_model", "Number of cache misses per model", s -> s.cacheMisses.sum());
            counter(out, "nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds", s -> s.cacheHitUs.sum());
            counter(out, "nv_cache_miss_duration_per_model", "Total cache miss (lookup and insertion) duration per model, in microseconds",
                    s -> s.cacheMissUs.sum());
        }
        out.append("# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.\n");
        out.append("# TYPE nv_inference_pending_request_count gauge\n");
        series.forEach((labels, s) -> out.append("nv_inference_pending_request_count{").append(labels).append("} ")
                .append(Math.max(0, s.pending.get())).append('\n'));
        out.append("# HELP nv_model_load_duration_secs Model load time in seconds\n");
        out.append("# TYPE nv_model_load_duration_secs gauge\n");
        loadTimes.forEach((labels, t) -> out.append("nv_model_load_duration_secs{").append(labels).append("} ")
                .append(String.format(Locale.ROOT, "%.9f", t.seconds())).append('\n'));
    }

    private void counter(StringBuilder out, String name, String help, ToLongFunction<Series> value) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(" counter\n");
        series.forEach((labels, s) -> out.append(name).append('{').append(labels).append("} ").append(value.applyAsLong(s)).append('\n'));
    }

    private static String escape(String v) {
        return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }
}
