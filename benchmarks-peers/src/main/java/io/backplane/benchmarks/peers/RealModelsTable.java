package io.backplane.benchmarks.peers;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import static io.backplane.benchmarks.peers.RealModelsBenchmark.*;

/** The markdown of {@link RealModelsBenchmark}: the table per model, the ratios, the configuration lines. */
final class RealModelsTable {
    private RealModelsTable() {
    }


    static String table(Ctx ctx, Map<String, Model> models, Map<String, Map<String, Map<String, List<Result>>>> results,
            Map<String, Map<String, List<Load>>> loads, Map<String, String> checks, Map<String, String> skipped, String startLoad, Instant started)
            throws Exception {
        StringBuilder s = new StringBuilder();
        long minutes = Duration.between(started, Instant.now()).toSeconds();
        s.append(String.format(Locale.ROOT, "## Real models, %s (%s size, %d round(s) of %.1f s + %.1f s warm-up per figure, median shown; took %d min %d s)%n%n",
                started.toString().substring(0, 16).replace('T', ' ') + " UTC", ctx.size, ctx.rounds, ctx.seconds, ctx.warmup, minutes / 60, minutes % 60));
        s.append("- load average (1/5/15 min): ").append(startLoad).append(" at the start, ").append(loadAverage()).append(" at the end; ")
                .append(Runtime.getRuntime().availableProcessors()).append(" cores\n");
        s.append("- JVM: ").append(System.getProperty("java.vm.name")).append(' ').append(System.getProperty("java.runtime.version")).append("; Python: ")
                .append(pythonVersions(ctx)).append('\n');
        s.append("- inputs: one fixed random request per model, batch 1 (ResNet: FP32 [1,3,H,W]; BERT: INT64 input_ids and attention_mask [1,")
                .append(ctx.seq).append("], all ones); every peer gets the same bytes\n");
        s.append("- req/s: closed-loop callers, each sends its next request when its answer is back; p50/p99: per-request latency in ms at that load\n");
        s.append("- load: from asking for the model to its first answer (REST: POST /v2/repository/models/…/load; flask/ray: the process's start, imports "
                + "included; in-process peers: in a fresh child JVM); RSS: VmRSS of the serving process and its children (stubs, workers) before → after, "
                + "the in-process peers in that child JVM\n\n");
        for (Model m : models.values()) {
            Map<String, Map<String, List<Result>>> byPeer = results.getOrDefault(m.group(), Map.of());
            List<String> peers = peersOf(ctx, m.group());
            s.append("### ").append(m.name()).append(m.group().equals("bert_torch") ? " (torch)" : torchScriptGroup(m.group()) ? " (TorchScript)" : " (ONNX)").append("\n\n");
            s.append("| peer | load s | RSS MiB before → after (Δ) | c1 p50 ms | c1 p99 ms | c1 req/s | c8 req/s | c8 p99 ms | c8 batched req/s | c32 req/s "
                    + "| c32 batched req/s | c32 batched p99 ms | first answer |\n");
            s.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
            for (String p : peers) {
                if (skipped.containsKey(m.group() + "/" + p)) {
                    s.append("| ").append(p).append(" | skipped: ").append(skipped.get(m.group() + "/" + p).replace('|', '/')).append(" |||||||||||\n");
                    continue;
                }
                Map<String, List<Result>> r = byPeer.getOrDefault(p, Map.of());
                boolean batcher = BATCHERS.contains(p);
                Load l = medianLoad(loads.getOrDefault(m.group(), Map.of()).getOrDefault(p, List.of()));
                s.append("| ").append(p).append(" | ").append(l == null ? "—" : String.format(Locale.ROOT, "%.1f", l.ms() / 1000)).append(" | ")
                        .append(l == null ? "—" : rss(l)).append(" | ")
                        .append(f(med(r, "c1", Result::p50ms))).append(" | ").append(f(med(r, "c1", Result::p99ms))).append(" | ")
                        .append(f(med(r, "c1", Result::perSecond))).append(" | ").append(f(med(r, "c8", Result::perSecond))).append(" | ")
                        .append(f(med(r, "c8", Result::p99ms))).append(" | ")
                        .append(batcher ? f(med(r, "c8b", Result::perSecond)) : "no batcher").append(" | ").append(f(med(r, "c32", Result::perSecond)))
                        .append(" | ").append(batcher ? f(med(r, "c32b", Result::perSecond)) : "no batcher").append(" | ")
                        .append(batcher ? f(med(r, "c32b", Result::p99ms)) : "—").append(" | ")
                        .append(checks.getOrDefault(m.group() + "/" + p, "—")).append(" |\n");
            }
            s.append('\n');
            List<List<String>> pairs = PAIRS.stream().filter(pr -> byPeer.containsKey(pr.get(0)) && byPeer.containsKey(pr.get(1))).toList();
            if (!pairs.isEmpty()) {
                s.append("Ratios (above 1: the first is better — higher req/s, lower ms; a peer without a batcher is compared with its unbatched figure):\n\n");
                s.append("| pair | c1 p50 | c1 p99 | c1 req/s | c8 req/s | c8 p99 | c8 batched req/s | c32 req/s | c32 batched req/s |\n");
                s.append("|---|---|---|---|---|---|---|---|---|\n");
                for (List<String> pr : pairs) {
                    Map<String, List<Result>> a = byPeer.get(pr.get(0));
                    Map<String, List<Result>> b = byPeer.get(pr.get(1));
                    String b8 = BATCHERS.contains(pr.get(1)) ? "c8b" : "c8";
                    String b32 = BATCHERS.contains(pr.get(1)) ? "c32b" : "c32";
                    s.append("| ").append(pr.get(0)).append(" vs ").append(pr.get(1)).append(" | ")
                            .append(x(med(b, "c1", Result::p50ms) / med(a, "c1", Result::p50ms))).append(" | ")
                            .append(x(med(b, "c1", Result::p99ms) / med(a, "c1", Result::p99ms))).append(" | ")
                            .append(x(med(a, "c1", Result::perSecond) / med(b, "c1", Result::perSecond))).append(" | ")
                            .append(x(med(a, "c8", Result::perSecond) / med(b, "c8", Result::perSecond))).append(" | ")
                            .append(x(med(b, "c8", Result::p99ms) / med(a, "c8", Result::p99ms))).append(" | ")
                            .append(BATCHERS.contains(pr.get(0)) ? x(med(a, "c8b", Result::perSecond) / med(b, b8, Result::perSecond)) : "—").append(" | ")
                            .append(x(med(a, "c32", Result::perSecond) / med(b, "c32", Result::perSecond))).append(" | ")
                            .append(BATCHERS.contains(pr.get(0)) ? x(med(a, "c32b", Result::perSecond) / med(b, b32, Result::perSecond)) : "—").append(" |\n");
                }
                s.append('\n');
            }
            for (String p : peers) {
                Map<String, List<Result>> r = byPeer.get(p);
                if (r != null && BATCHERS.contains(p)) {
                    s.append(String.format(Locale.ROOT, "- dynamic batching gain, %s: %s at 8 callers, %s at 32 callers%n", p,
                            x(med(r, "c8b", Result::perSecond) / med(r, "c8", Result::perSecond)), x(med(r, "c32b", Result::perSecond) / med(r, "c32", Result::perSecond))));
                }
            }
            s.append("\nConfiguration:\n\n");
            for (String p : peers) {
                String c = ctx.configs.get(m.group() + "/" + p);
                if (c != null) {
                    s.append("- ").append(p).append(": ").append(c).append('\n');
                }
                String cb = ctx.configs.get(m.group() + "/" + p + "/b");
                if (cb != null) {
                    s.append("- ").append(p).append(", batched: ").append(cb).append('\n');
                }
            }
            s.append('\n');
        }
        return s.toString();
    }

    static String rss(Load l) {
        if (l.rssBeforeKb() == 0) {
            return String.format(Locale.ROOT, "— → %.0f", l.rssAfterKb() / 1024.0);
        }
        return String.format(Locale.ROOT, "%.0f → %.0f (+%.0f)", l.rssBeforeKb() / 1024.0, l.rssAfterKb() / 1024.0, (l.rssAfterKb() - l.rssBeforeKb()) / 1024.0);
    }

    static Load medianLoad(List<Load> ls) {
        if (ls.isEmpty()) {
            return null;
        }
        List<Load> sorted = ls.stream().sorted((a, b) -> Double.compare(a.ms(), b.ms())).toList();
        return sorted.get((sorted.size() - 1) / 2);
    }

    static double med(Map<String, List<Result>> r, String key, java.util.function.ToDoubleFunction<Result> f) {
        double[] v = r.getOrDefault(key, List.of()).stream().mapToDouble(f).sorted().toArray();
        if (v.length == 0) {
            return Double.NaN;
        }
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    static String f(double v) {
        if (Double.isNaN(v)) {
            return "—";
        }
        return String.format(Locale.ROOT, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
    }

    static String x(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "—" : String.format(Locale.ROOT, "%.2f×", v);
    }

    static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static final Map<String, String> VERSIONS = new HashMap<>();

    static synchronized String version(Ctx ctx, String module) {
        return VERSIONS.computeIfAbsent(module, k -> {
            String v = pythonLine(ctx, "import importlib.metadata as m; print(m.version('" + k + "'))");
            return v == null ? "?" : v;
        });
    }

    static String pythonVersions(Ctx ctx) {
        String v = pythonLine(ctx, "import sys, importlib.metadata as m\n"
                + "def v(n):\n    try:\n        return m.version(n)\n    except Exception:\n        return 'absent'\n"
                + "print(sys.version.split()[0] + ', torch ' + v('torch') + ', transformers ' + v('transformers') + ', onnxruntime (python) ' + v('onnxruntime'))");
        return (v == null ? ctx.python + " (did not run)" : v) + " (" + ctx.python + ")";
    }

    static String pythonLine(Ctx ctx, String code) {
        try {
            Process p = new ProcessBuilder(ctx.python, "-c", code).redirectErrorStream(true).start();
            String out;
            try (InputStream in = p.getInputStream()) {
                out = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
            }
            return p.waitFor() == 0 ? out : null;
        } catch (IOException | InterruptedException e) {
            return null;
        }
    }
}
