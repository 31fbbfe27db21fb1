package io.backplane.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What a generation run ({@link OpenAiBench}) measured: one {@link Level} per concurrency level,
 * in the order run.
 *
 * @param target the endpoint, e.g. {@code openai http://127.0.0.1:9000/v1/chat/completions}
 * @param model the requests' {@code model}
 * @param maxTokens the requests' {@code max_tokens}
 */
public record GenerationResult(String target, String model, int maxTokens, List<Level> levels) {
    public GenerationResult {
        levels = List.copyOf(levels);
    }

    /** Where a level's token counts came from. */
    public enum Source {
        /** From the server's usage figures, for every request. */
        usage,
        /** One token per content chunk, for every request (the server reported no usage for it). */
        chunks,
        /** From usage for some requests, from content chunks for others. */
        mixed,
        /** No request succeeded. */
        none
    }

    /**
     * One concurrency level; times in ms, a figure that was not measured is {@code NaN}.
     *
     * @param concurrency streams in flight
     * @param requests successful requests measured
     * @param errors failed requests measured
     * @param seconds the measured window
     * @param requestsPerSecond successful requests per second
     * @param ttftP50Ms median time to first token: from sending to the first chunk with content; p99 likewise
     * @param itlP50Ms median inter-token latency: between content chunks, divided by the later chunk's tokens, per token; p99 likewise
     * @param itlTokensFrom where the tokens per chunk came from: {@link Source#usage} deltas, or 1 per content {@link Source#chunks chunk}
     * @param outputTokensPerSecond output tokens of the successful requests per second of the window
     * @param outputTokens output tokens of the successful requests
     * @param meanOutputTokens output tokens per successful request
     * @param outputTokensFrom where the output tokens came from: the final {@link Source#usage}, or content {@link Source#chunks}
     * @param contentChunks chunks with content, over the successful requests
     * @param latencyP50Ms median time from sending a request to the end of its stream; p99 likewise
     * @param firstError the first error's message, or empty
     */
    public record Level(int concurrency, long requests, long errors, double seconds, double requestsPerSecond, double ttftP50Ms,
            double ttftP99Ms, double itlP50Ms, double itlP99Ms, Source itlTokensFrom, double outputTokensPerSecond, long outputTokens,
            double meanOutputTokens, Source outputTokensFrom, long contentChunks, double latencyP50Ms, double latencyP99Ms, String firstError) {

        /** Failed requests as a fraction of all requests measured (0 when none was measured). */
        public double errorRate() {
            long all = requests + errors;
            return all == 0 ? 0 : (double) errors / all;
        }
    }

    /** A plain-text table, with a line saying where the token counts came from. */
    public String table() {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%s, model %s, max_tokens %d (streamed)%n", target, model, maxTokens));
        b.append(String.format(Locale.ROOT, "%11s %10s %12s %12s %10s %10s %12s %10s %14s %14s %8s%n", "concurrency", "requests/s", "TTFT p50 ms",
                "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "output tok/s", "tokens/req", "latency p50 ms", "latency p99 ms", "errors"));
        for (Level l : levels) {
            b.append(String.format(Locale.ROOT, "%11d %10.2f %12.1f %12.1f %10.2f %10.2f %12.1f %10.1f %14.1f %14.1f %8d%n", l.concurrency(),
                    l.requestsPerSecond(), l.ttftP50Ms(), l.ttftP99Ms(), l.itlP50Ms(), l.itlP99Ms(), l.outputTokensPerSecond(), l.meanOutputTokens(),
                    l.latencyP50Ms(), l.latencyP99Ms(), l.errors()));
            if (!l.firstError().isEmpty()) {
                b.append("            first error: ").append(l.firstError()).append('\n');
            }
        }
        b.append("ITL tokens per chunk: ").append(describe(levels.stream().map(Level::itlTokensFrom).toList(), "usage deltas",
                "1 per content chunk (no per-chunk usage)")).append("; output tokens: ").append(describe(
                        levels.stream().map(Level::outputTokensFrom).toList(), "the final usage", "content chunks (no usage)")).append('\n');
        return b.toString();
    }

    private static String describe(List<Source> sources, String usage, String chunks) {
        List<Source> seen = sources.stream().filter(s -> s != Source.none).distinct().toList();
        if (seen.size() == 1 && seen.get(0) == Source.usage) {
            return usage;
        }
        if (seen.size() == 1 && seen.get(0) == Source.chunks) {
            return chunks;
        }
        return seen.isEmpty() ? "none measured" : "mixed (" + usage + " for some requests, " + chunks + " for others)";
    }

    private static final List<String> COLUMNS = List.of("target", "model", "max_tokens", "concurrency", "requests", "errors", "seconds",
            "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "itl_tokens_from", "output_tokens_per_s", "output_tokens",
            "mean_output_tokens", "output_tokens_from", "content_chunks", "latency_p50_ms", "latency_p99_ms", "first_error");

    /** CSV: a header line, then one line per level; figures not measured are empty. */
    public String csv() {
        return ResultFormat.csv(COLUMNS, rows(), "%.3f");
    }

    /** JSON: {@code {"target":…, "model":…, "max_tokens":…, "levels":[{…the CSV columns…}]}}; figures not measured are null. */
    public String json() {
        Map<String, Object> head = new LinkedHashMap<>();
        head.put("target", target);
        head.put("model", model);
        head.put("max_tokens", maxTokens);
        return ResultFormat.json(head, rows());
    }

    private List<Map<String, Object>> rows() {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Level l : levels) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("target", target);
            r.put("model", model);
            r.put("max_tokens", maxTokens);
            r.put("concurrency", l.concurrency());
            r.put("requests", l.requests());
            r.put("errors", l.errors());
            r.put("seconds", figure(l.seconds()));
            r.put("requests_per_s", figure(l.requestsPerSecond()));
            r.put("ttft_p50_ms", figure(l.ttftP50Ms()));
            r.put("ttft_p99_ms", figure(l.ttftP99Ms()));
            r.put("itl_p50_ms", figure(l.itlP50Ms()));
            r.put("itl_p99_ms", figure(l.itlP99Ms()));
            r.put("itl_tokens_from", l.itlTokensFrom() == Source.none ? null : l.itlTokensFrom().name());
            r.put("output_tokens_per_s", figure(l.outputTokensPerSecond()));
            r.put("output_tokens", l.outputTokens());
            r.put("mean_output_tokens", figure(l.meanOutputTokens()));
            r.put("output_tokens_from", l.outputTokensFrom() == Source.none ? null : l.outputTokensFrom().name());
            r.put("content_chunks", l.contentChunks());
            r.put("latency_p50_ms", figure(l.latencyP50Ms()));
            r.put("latency_p99_ms", figure(l.latencyP99Ms()));
            r.put("first_error", l.firstError().isEmpty() ? null : l.firstError());
            out.add(r);
        }
        return out;
    }

    private static @Nullable Double figure(double v) {
        return Double.isNaN(v) ? null : Math.round(v * 1000) / 1000.0;
    }
}
