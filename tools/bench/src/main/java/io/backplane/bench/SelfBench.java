package io.backplane.bench;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.grpc.GrpcFrontendFactory;
import io.backplane.plugin.http.HttpFrontendFactory;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.testkit.IdentityBackendFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Measures what the protocol layers add: starts one embedded host serving an identity model,
 * with the REST and gRPC frontends on free loopback ports, and runs the same concurrency sweep
 * against the embedded host, REST and gRPC, one after the other, in one process.
 */
public final class SelfBench {
    private SelfBench() {
    }

    /** The three results, embedded first. */
    public static List<BenchResult> run(List<Integer> concurrency, Duration duration, Duration warmup, long elements, int instances)
            throws Exception {
        List<BenchResult> results = new ArrayList<>();
        try (BackplaneHost host = BackplaneHost.builder().backend(new IdentityBackendFactory()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(IdentityBackendFactory.model("identity", instances)).loadModel("identity").build()) {
            Frontend http = new HttpFrontendFactory().create(context(host, Map.of("host", "127.0.0.1", "port", "0")));
            Frontend grpc = new GrpcFrontendFactory().create(context(host, Map.of("host", "127.0.0.1", "port", "0")));
            try (http; grpc) {
                http.start();
                grpc.start();
                List<Long> shape = List.of(elements);
                BenchOptions.Builder common = BenchOptions.builder("identity");
                common.concurrency(concurrency).duration(duration).warmup(warmup).inputShape(shape);
                results.add(Bench.run(common.service(host).build()));
                results.add(Bench.run(BenchOptions.builder("identity").concurrency(concurrency).duration(duration).warmup(warmup)
                        .inputShape(shape).url(http.endpoint().replace("0.0.0.0", "127.0.0.1")).build()));
                results.add(Bench.run(BenchOptions.builder("identity").concurrency(concurrency).duration(duration).warmup(warmup)
                        .inputShape(shape).grpc(grpc.endpoint().replace("grpc://", "")).build()));
            }
        }
        return results;
    }

    private static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }

    /** {@code [--concurrency 1,8,64] [--duration-s 5] [--warmup-s 2] [--elements 16] [--instances 2]}. */
    public static void main(String[] args) throws Exception {
        List<Integer> concurrency = List.of(1, 8, 64);
        double duration = 5;
        double warmup = 2;
        long elements = 16;
        int instances = 2;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--concurrency" -> concurrency = java.util.Arrays.stream(args[i + 1].split(",")).map(Integer::parseInt).toList();
                case "--duration-s" -> duration = Double.parseDouble(args[i + 1]);
                case "--warmup-s" -> warmup = Double.parseDouble(args[i + 1]);
                case "--elements" -> elements = Long.parseLong(args[i + 1]);
                case "--instances" -> instances = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        List<BenchResult> results = run(concurrency, Duration.ofMillis((long) (duration * 1000)), Duration.ofMillis((long) (warmup * 1000)),
                elements, instances);
        System.out.printf("identity model, FP32[%d] in and out, %d instance(s), %d cores, Java %s%n", elements, instances,
                Runtime.getRuntime().availableProcessors(), Runtime.version());
        for (BenchResult r : results) {
            System.out.println();
            System.out.print(r.table());
        }
        BenchResult embedded = results.get(0);
        System.out.println();
        System.out.println("p50 added over embedded (µs):");
        for (int i = 1; i < results.size(); i++) {
            StringBuilder b = new StringBuilder("  " + results.get(i).target().split(" ")[0] + ":");
            for (int l = 0; l < embedded.levels().size(); l++) {
                b.append(String.format(java.util.Locale.ROOT, "  c=%d %+.1f", embedded.levels().get(l).concurrency(),
                        results.get(i).levels().get(l).p50Micros() - embedded.levels().get(l).p50Micros()));
            }
            System.out.println(b);
        }
    }
}
