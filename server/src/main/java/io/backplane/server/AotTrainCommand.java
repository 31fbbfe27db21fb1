package io.backplane.server;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.ModelState;
import io.backplane.spi.host.ModelStatus;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code backplane aot-train}: the training run of the JDK's ahead-of-time cache (JEP 483/514/515),
 * which {@code bin/backplane aot-cache} runs under {@code -XX:AOTCacheOutput}. It serves the
 * repository on loopback ports (free ones), drives every ready model through REST, gRPC (plain
 * models) and the embedded host with the load tool for a short while, scrapes the metrics and the
 * health and metadata endpoints, then stops the server and exits 0, so that the JVM writes the
 * classes it loaded and the method profiles it gathered into the cache. Hidden: it is useful only
 * under that flag.
 */
@Command(name = "aot-train", hidden = true, description = "The training run of 'backplane aot-cache' (run that instead).")
final class AotTrainCommand implements Callable<Integer> {
    private static final Logger log = LoggerFactory.getLogger(AotTrainCommand.class);

    @Option(names = {"--model-repository", "--model-store"}, paramLabel = "<dir>", description = "A model repository (default: as serve).")
    List<Path> repositories = new ArrayList<>();

    @Option(names = "--requests", paramLabel = "<n>", defaultValue = "2000", description = "Requests per model, protocol and concurrency (default: ${DEFAULT-VALUE}).")
    int requests;

    private final Path workingDirectory;
    private final @Nullable Path home;
    private final UnaryOperator<io.backplane.core.BackplaneHost.Builder> customize;

    AotTrainCommand(Path workingDirectory, @Nullable Path home, UnaryOperator<io.backplane.core.BackplaneHost.Builder> customize) {
        this.workingDirectory = requireNonNull(workingDirectory, "workingDirectory is null");
        this.home = home;
        this.customize = requireNonNull(customize, "customize is null");
    }

    @Override
    public Integer call() throws Exception {
        List<String> args = new ArrayList<>(List.of("serve", "--http-port=0", "--grpc-port=0", "--metrics-port=0", "--openai-port=-1", "--http-address=127.0.0.1",
                "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1"));
        for (Path r : repositories) {
            args.add("--model-repository=" + r);
        }
        Exception[] failure = new Exception[1];
        int code = Main.commandLine(workingDirectory, home, customize, server -> {
            try {
                drive(server);
            } catch (Exception e) {
                failure[0] = e;
            } finally {
                server.close();
            }
        }).execute(args.toArray(String[]::new));
        if (failure[0] != null) {
            throw failure[0];
        }
        return code;
    }

    private void drive(Server server) throws Exception {
        Map<String, String> endpoints = server.endpoints();
        String http = loopback(endpoints.get("http"));
        String grpc = endpoints.get("grpc") == null ? null : URI.create(loopback(endpoints.get("grpc"))).getAuthority();
        String metrics = loopback(endpoints.get("metrics"));
        List<String> models = new ArrayList<>();
        for (ModelStatus s : server.host().repositoryIndex()) {
            if (s.state() == ModelState.READY) {
                models.add(s.name());
            }
        }
        Bench bench = findBench();
        try (HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
            for (String m : models) {
                io.backplane.spi.config.ModelConfig config = server.host().modelConfig(m, -1);
                boolean decoupled = config.decoupled();
                embedded(server.host(), config);
                get(client, http + "/v2/models/" + m);
                get(client, http + "/v2/models/" + m + "/config");
                get(client, http + "/v2/models/" + m + "/ready");
                if (bench == null) {
                    continue;
                }
                bench.run(m, "--url", http);
                if (grpc != null && !decoupled) {
                    bench.run(m, "--grpc", grpc);
                }
            }
            get(client, http + "/v2/health/ready");
            send(client, HttpRequest.newBuilder(URI.create(http + "/v2/repository/index")).POST(HttpRequest.BodyPublishers.ofString("{}")));
            if (metrics != null) {
                get(client, metrics); // the endpoint is the /metrics URL
            }
        }
        log.info("aot training: drove {} model(s) through {}", models.size(), bench == null ? "the metadata endpoints (the load tool is not installed)"
                : grpc == null ? "REST" : "REST and gRPC");
    }

    /** The embedded host's own path ({@code infer}, {@code stream}), as an application calls it: zeros shaped from the config. */
    private void embedded(io.backplane.core.BackplaneHost host, io.backplane.spi.config.ModelConfig config) throws Exception {
        io.backplane.spi.InferenceRequest.Builder b = io.backplane.spi.InferenceRequest.builder(config.name());
        for (io.backplane.spi.config.TensorConfig in : config.inputs()) {
            if (in.optional()) {
                continue;
            }
            List<Long> dims = new ArrayList<>();
            if (config.batches()) {
                dims.add(1L);
            }
            long n = 1;
            for (long d : in.dims()) {
                dims.add(d < 0 ? 1 : d);
                n *= d < 0 ? 1 : d;
            }
            long[] shape = dims.stream().mapToLong(Long::longValue).toArray();
            if (in.dataType() == io.backplane.spi.DataType.BYTES) {
                List<byte[]> x = new ArrayList<>();
                for (long i = 0; i < n; i++) {
                    x.add(new byte[] {'x'});
                }
                b.input(io.backplane.spi.Tensor.ofBytes(in.name(), shape, x));
            } else {
                b.input(io.backplane.spi.Tensor.ofRaw(in.name(), in.dataType(), shape, new byte[Math.toIntExact(n * in.dataType().byteSize())]));
            }
        }
        io.backplane.spi.InferenceRequest request = b.build();
        for (int i = 0; i < requests; i++) {
            try {
                if (config.decoupled()) {
                    java.util.concurrent.CompletableFuture<@Nullable Void> done = new java.util.concurrent.CompletableFuture<>();
                    host.stream(request, new io.backplane.spi.host.ResponseObserver() {
                        @Override
                        public void onResponse(io.backplane.spi.InferenceResponse response) {
                        }

                        @Override
                        public void onComplete() {
                            done.complete(null);
                        }

                        @Override
                        public void onError(io.backplane.spi.BackplaneException error) {
                            done.completeExceptionally(error);
                        }
                    });
                    done.get(30, java.util.concurrent.TimeUnit.SECONDS);
                } else {
                    host.infer(request).get(30, java.util.concurrent.TimeUnit.SECONDS);
                }
            } catch (java.util.concurrent.ExecutionException e) {
                log.warn("aot training: model '{}' refused zeros through the embedded host ({}); going on", config.name(), e.getCause().getMessage());
                return;
            }
        }
    }

    private @Nullable Bench findBench() {
        try {
            Class<?> c = Class.forName(BenchCommand.BENCH_CLASS, true, AotTrainCommand.class.getClassLoader());
            Method parse = c.getMethod("parse", String[].class);
            Method run = c.getMethod("run", parse.getReturnType());
            return new Bench(parse, run);
        } catch (ReflectiveOperationException | LinkageError e) {
            log.info("aot training: the load tool ({}) is not installed; REST and gRPC get the metadata calls only", BenchCommand.BENCH_CLASS);
            return null;
        }
    }

    private static @Nullable String loopback(@Nullable String endpoint) {
        return endpoint == null ? null : endpoint.replace("0.0.0.0", "127.0.0.1");
    }

    private static void get(HttpClient client, @Nullable String url) throws Exception {
        if (url != null) {
            send(client, HttpRequest.newBuilder(URI.create(url)));
        }
    }

    private static void send(HttpClient client, HttpRequest.Builder request) throws Exception {
        HttpRequest r = request.timeout(Duration.ofSeconds(30)).build();
        HttpResponse<byte[]> response = client.send(r, HttpResponse.BodyHandlers.ofByteArray());
        if (response.statusCode() / 100 != 2) {
            log.warn("aot training: {} {} answered {}", r.method(), r.uri(), response.statusCode());
        }
    }

    /** The load tool, found by reflection as {@code backplane bench} does (it is optional in lib/). */
    private final class Bench {
        private final Method parse;
        private final Method run;

        private Bench(Method parse, Method run) {
            this.parse = parse;
            this.run = run;
        }

        void run(String model, String... target) throws Exception {
            List<String> a = new ArrayList<>(List.of(target));
            a.addAll(List.of("--model", model, "--concurrency", "1,4", "--request-count", String.valueOf(requests), "--duration-s", "5",
                    "--warmup-s", "0", "--max-error-rate", "1"));
            try {
                Object options = parse.invoke(null, (Object) a.toArray(String[]::new));
                run.invoke(null, options);
            } catch (InvocationTargetException e) {
                log.warn("aot training: the load tool failed on model '{}' ({}): {}", model, target[0], e.getCause().toString());
            }
        }
    }
}
