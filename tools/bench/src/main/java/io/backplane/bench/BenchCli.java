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
                "", "Target: exactly one of --url, --grpc, --embedded-repository."},
        footer = {"", "Examples:",
                "  backplane bench --url http://127.0.0.1:8000 --model add_sub --concurrency 1,8",
                "  backplane bench --url http://127.0.0.1:8000 --model repeat_decoupled --input-shape 3 --format csv",
                "  backplane bench --embedded-repository samples/models --model onnx_add_sub --duration-s 2",
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

    @Option(names = "--backend-directory", paramLabel = "<dir>",
            description = "Embedded mode: a folder of backend plugin directories, added to the distribution's bundled backends; repeatable.")
    List<Path> backendDirectories = new ArrayList<>();

    @Option(names = "--model", paramLabel = "<name>", required = true, description = "The model to call (required).")
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

    /** What the command line asks for. */
    record Parsed(BenchOptions options, Format format, @Nullable Path output, double maxErrorRate) {
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
        return new Parsed(b.build(), format, output, maxErrorRate);
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
        BenchResult result;
        try {
            result = Bench.run(p.options());
        } catch (Exception e) {
            err.println("backplane bench: " + Bench.describe(e));
            return 1;
        }
        String text = switch (p.format()) {
            case table -> result.table();
            case csv -> result.csv();
            case json -> result.json();
        };
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
        for (BenchResult.Level l : result.levels()) {
            if (l.errorRate() > p.maxErrorRate()) {
                err.println(String.format(Locale.ROOT, "backplane bench: %d of %d requests failed at concurrency %d (%.1f %%), above --max-error-rate %s; first error: %s",
                        l.errors(), l.errors() + l.requests(), l.concurrency(), 100 * l.errorRate(), p.maxErrorRate(), l.firstError()));
                status = 1;
            }
        }
        return status;
    }
}
