package io.backplane.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code backplane bench}'s command line: the options, their help, the output formats and the exit status. */
@Command(name = "backplane bench", sortOptions = false, usageHelpAutoWidth = true, mixinStandardHelpOptions = false,
        description = {"A perf_analyzer-style load generator: closed-loop virtual clients at each concurrency level, each sending a request and "
                + "waiting for its answer, for the warm-up and then the measured duration. Reports throughput and latency percentiles; for a "
                + "decoupled model (REST or embedded) the requests go over a stream and the time to the first response and between responses "
                + "are reported too; server-side queue and compute times are read from the server's statistics endpoint when it has one.",
                "", "Generation mode (--openai-url): streamed chat completions (or completions) against an OpenAI-compatible server, as AIPerf "
                + "and genai-perf measure them: at each concurrency level that many streams in flight; reports requests/s, TTFT (send to the "
                + "first chunk with content; the role-only first chunk does not count), inter-token latency (time between content chunks "
                + "divided by the later chunk's tokens: usage deltas when every chunk carries usage, else 1 per chunk; the output says "
                + "which), output tokens/s (from the final usage, else content chunks), output tokens per request, request latency and errors.",
                "", "Target: exactly one of --url, --grpc, --embedded-repository, --openai-url."},
        footer = {"", "Examples:",
                "  backplane bench --url http://127.0.0.1:8000 --model add_sub --concurrency 1,8",
                "  backplane bench --url http://127.0.0.1:8000 --model repeat_decoupled --input-shape 3 --format csv",
                "  backplane bench --embedded-repository samples/models --model onnx_add_sub --duration-s 2",
                "  backplane bench --openai-url http://127.0.0.1:9000 --model llama --max-tokens 256 --concurrency 1,4,16 --duration-s 30",
                "  backplane bench --openai-url http://127.0.0.1:9000 --openai-endpoint completions --model llama --request-count 50 --format csv",
                "", "Exit status: 0; 1 when the run failed or a level's error rate passed --max-error-rate; 2 for bad options."})
final class BenchCli {
    enum Format { table, csv, json }

    @Option(names = "--url", paramLabel = "<url>", description = "REST (Open Inference Protocol) server, e.g. http://127.0.0.1:8000.")
    @Nullable String url;

    @Option(names = "--grpc", paramLabel = "<host:port>", description = "gRPC server, e.g. 127.0.0.1:8001 (plain models only).")
    @Nullable String grpc;

    @Option(names = "--embedded-repository", paramLabel = "<dir>",
            description = "Serve this model repository in-process and call the host as a Java application does (one blocking thread per client).")
    @Nullable Path repository;

    @Option(names = "--openai-url", paramLabel = "<url>",
            description = "Generation mode: an OpenAI-compatible server's base URL, e.g. http://127.0.0.1:9000 (a trailing /v1 is accepted).")
    @Nullable String openaiUrl;

    @Option(names = "--openai-endpoint", paramLabel = "<api>",
            description = "Generation mode: chat (POST /v1/chat/completions, the prompt as one user message) or completions (POST /v1/completions) "
                    + "(default: chat).")
    OpenAiOptions.@Nullable Endpoint openaiEndpoint;

    @Option(names = "--openai-api-key", paramLabel = "<key>", description = "Generation mode: sent as 'Authorization: Bearer <key>' (default: no header).")
    @Nullable String openaiApiKey;

    @Option(names = "--prompt", paramLabel = "<text>", description = "Generation mode: the prompt of every request (default: a one-line story request).")
    @Nullable String prompt;

    @Option(names = "--max-tokens", paramLabel = "<n>", description = "Generation mode: max_tokens of every request (default: 128).")
    @Nullable Integer maxTokens;

    @Option(names = "--extra-body", paramLabel = "<json>",
            description = "Generation mode: a JSON object merged into every request body, e.g. '{\"ignore_eos\": true}', or "
                    + "'{\"stream_options\": {\"continuous_usage_stats\": true}}' for per-chunk usage from vLLM.")
    @Nullable String extraBody;

    @Option(names = "--backend-directory", paramLabel = "<dir>",
            description = "Embedded mode: a folder of backend plugin directories, added to the distribution's bundled backends; repeatable.")
    List<Path> backendDirectories = new ArrayList<>();

    @Option(names = "--model", paramLabel = "<name>", required = true, description = "The model to call (required; for --openai-url, the request's model).")
    String model = "";

    @Option(names = "--model-version", paramLabel = "<n>", defaultValue = "-1", description = "Model version (default: the latest).")
    long version;

    @Option(names = "--concurrency", paramLabel = "<c,c,…>", split = ",", defaultValue = "1,8,64",
            description = "Concurrency levels to sweep: virtual clients, each with one request in flight (default: ${DEFAULT-VALUE}).")
    List<Integer> concurrency = new ArrayList<>();

    @Option(names = "--duration-s", paramLabel = "<s>", defaultValue = "5", description = "Measured seconds per level (default: ${DEFAULT-VALUE}).")
    double durationSeconds;

    @Option(names = "--request-count", paramLabel = "<n>", defaultValue = "0",
            description = "Measure this many requests per level instead of a duration (--duration-s is then a limit).")
    long requestCount;

    @Option(names = "--warmup-s", paramLabel = "<s>", defaultValue = "1", description = "Unmeasured seconds before each level (default: ${DEFAULT-VALUE}).")
    double warmupSeconds;

    @Option(names = "--input-shape", paramLabel = "<d,d,…>", split = ",",
            description = "Shape of every input (default: the model's, variable dimensions as 1).")
    @Nullable List<Long> inputShape;

    @Option(names = "--input-datatype", paramLabel = "<type>", description = "Datatype of every input, e.g. FP32 (default: the model's).")
    @Nullable String inputDatatype;

    @Option(names = "--connections", paramLabel = "<n>", defaultValue = "0",
            description = "gRPC channels to spread the load over (default: one per processor, at most the concurrency).")
    int connections;

    @Option(names = "--format", paramLabel = "<format>", defaultValue = "table", description = "Output: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}).")
    Format format = Format.table;

    @Option(names = "--output", paramLabel = "<file>", description = "Write the output to this file instead of standard output.")
    @Nullable Path output;

    @Option(names = "--max-error-rate", paramLabel = "<fraction>", defaultValue = "0",
            description = "Exit with status 1 when a level's failed requests pass this fraction of its requests (default: ${DEFAULT-VALUE}: any error).")
    double maxErrorRate;

    @Option(names = {"-h", "--help"}, usageHelp = true, description = "Show this help and exit.")
    boolean help;

    /** What the command line asks for: {@code options} for an Open Inference Protocol or embedded target, else {@code openai}. */
    record Parsed(@Nullable BenchOptions options, @Nullable OpenAiOptions openai, Format format, @Nullable Path output, double maxErrorRate) {
    }

    /** The usage text, with every option's description. */
    static String usage() {
        return new CommandLine(new BenchCli()).getUsageMessage(CommandLine.Help.Ansi.OFF);
    }

    /**
     * Parses a command line.
     *
     * @throws IllegalArgumentException naming the bad option or value, with the usage
     */
    static Parsed parse(String... args) {
        BenchCli cli = new BenchCli();
        CommandLine cl = new CommandLine(cli).setCaseInsensitiveEnumValuesAllowed(true);
        try {
            cl.parseArgs(args);
        } catch (CommandLine.ParameterException e) {
            throw new IllegalArgumentException(e.getMessage() + "\n" + usage(), e);
        }
        return cli.toParsed();
    }

    private Parsed toParsed() {
        if (maxErrorRate < 0 || maxErrorRate > 1) {
            throw new IllegalArgumentException("--max-error-rate " + maxErrorRate + " is not a fraction between 0 and 1 (e.g. 0.01 for 1 %)");
        }
        if (openaiUrl != null) {
            return openai(openaiUrl);
        }
        String generationOnly = " applies to the generation mode (--openai-url) only";
        refuse(openaiEndpoint != null, "--openai-endpoint", generationOnly);
        refuse(openaiApiKey != null, "--openai-api-key", generationOnly);
        refuse(prompt != null, "--prompt", generationOnly);
        refuse(maxTokens != null, "--max-tokens", generationOnly);
        refuse(extraBody != null, "--extra-body", generationOnly);
        BenchOptions.Builder b = BenchOptions.builder(model).version(version).concurrency(concurrency)
                .duration(Duration.ofMillis((long) (durationSeconds * 1000))).warmup(Duration.ofMillis((long) (warmupSeconds * 1000)))
                .inputShape(inputShape).inputDatatype(inputDatatype == null ? null : inputDatatype.toUpperCase(Locale.ROOT)).connections(connections).requestCount(requestCount);
        if (url != null) {
            b.url(url);
        }
        if (grpc != null) {
            b.grpc(grpc);
        }
        if (repository != null) {
            b.embeddedRepository(repository);
            String home = System.getProperty("backplane.home");
            if (home != null && Files.isDirectory(Path.of(home, "backends"))) {
                b.backendsDirectory(Path.of(home, "backends"));
            }
            for (Path p : backendDirectories) {
                if (!Files.isDirectory(p)) {
                    throw new IllegalArgumentException("--backend-directory '" + p + "' is not a directory");
                }
                b.backendsDirectory(p);
            }
        } else if (!backendDirectories.isEmpty()) {
            throw new IllegalArgumentException("--backend-directory applies to --embedded-repository only (a server loads its own backends)");
        }
        return new Parsed(b.build(), null, format, output, maxErrorRate);
    }

    private Parsed openai(String base) {
        int targets = 1 + (url != null ? 1 : 0) + (grpc != null ? 1 : 0) + (repository != null ? 1 : 0);
        if (targets != 1) {
            throw new IllegalArgumentException("give exactly one target: --url, --grpc, --embedded-repository or --openai-url (found " + targets + ")");
        }
        String why = " does not apply to --openai-url (the generation mode sends a prompt to a model by name, one connection per stream)";
        refuse(version != -1, "--model-version", why);
        refuse(inputShape != null, "--input-shape", why);
        refuse(inputDatatype != null, "--input-datatype", why);
        refuse(connections != 0, "--connections", why);
        refuse(!backendDirectories.isEmpty(), "--backend-directory", why);
        OpenAiOptions o = new OpenAiOptions(base, openaiEndpoint != null ? openaiEndpoint : OpenAiOptions.Endpoint.chat, openaiApiKey, model,
                prompt != null ? prompt : OpenAiOptions.DEFAULT_PROMPT, maxTokens != null ? maxTokens : 128,
                extraBody != null ? OpenAiOptions.parseExtraBody(extraBody) : null, concurrency, Duration.ofMillis((long) (durationSeconds * 1000)),
                Duration.ofMillis((long) (warmupSeconds * 1000)), requestCount);
        return new Parsed(null, o, format, output, maxErrorRate);
    }

    private static void refuse(boolean given, String option, String why) {
        if (given) {
            throw new IllegalArgumentException(option + why);
        }
    }

    /** Runs a command line; returns the exit status. */
    static int execute(String[] args, PrintWriter out, PrintWriter err) {
        if (List.of(args).contains("--help") || List.of(args).contains("-h")) {
            out.print(usage());
            out.flush();
            return 0;
        }
        Parsed p;
        try {
            p = parse(args);
        } catch (IllegalArgumentException e) {
            err.println("backplane bench: " + e.getMessage().lines().findFirst().orElse(""));
            err.println("Run 'backplane bench --help' for the options.");
            return 2;
        }
        String text;
        List<LevelErrors> levels = new ArrayList<>();
        try {
            if (p.openai() != null) {
                GenerationResult result = OpenAiBench.run(p.openai());
                text = switch (p.format()) {
                    case table -> result.table();
                    case csv -> result.csv();
                    case json -> result.json();
                };
                result.levels().forEach(l -> levels.add(new LevelErrors(l.concurrency(), l.requests(), l.errors(), l.errorRate(), l.firstError())));
            } else {
                BenchResult result = Bench.run(java.util.Objects.requireNonNull(p.options(), "options is null"));
                text = switch (p.format()) {
                    case table -> result.table();
                    case csv -> result.csv();
                    case json -> result.json();
                };
                result.levels().forEach(l -> levels.add(new LevelErrors(l.concurrency(), l.requests(), l.errors(), l.errorRate(), l.firstError())));
            }
        } catch (Exception e) {
            err.println("backplane bench: " + Bench.describe(e));
            return 1;
        }
        if (p.output() != null) {
            try {
                Files.writeString(p.output(), text, StandardCharsets.UTF_8);
            } catch (IOException e) {
                err.println("backplane bench: cannot write " + p.output() + ": " + e.getMessage());
                return 1;
            }
        } else {
            out.print(text);
            out.flush();
        }
        int status = 0;
        for (LevelErrors l : levels) {
            if (l.errorRate() > p.maxErrorRate()) {
                err.println(String.format(Locale.ROOT, "backplane bench: %d of %d requests failed at concurrency %d (%.1f %%), above --max-error-rate %s; first error: %s",
                        l.errors(), l.errors() + l.requests(), l.concurrency(), 100 * l.errorRate(), p.maxErrorRate(), l.firstError()));
                status = 1;
            }
        }
        return status;
    }

    /** What the exit status looks at in a level of either mode. */
    private record LevelErrors(int concurrency, long requests, long errors, double errorRate, String firstError) {
    }
}
