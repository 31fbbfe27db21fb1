package io.backplane.bench;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.host.InferenceService;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * What to measure. Exactly one target: {@code url} (REST, e.g. {@code http://127.0.0.1:8000}),
 * {@code grpc} ({@code host:port}), {@code embeddedRepository} (a model repository served by an
 * embedded host the bench starts) or {@code service} (an already running host, programmatic use).
 *
 * @param model model to call
 * @param version model version, or -1 for the latest
 * @param concurrency closed-loop concurrency levels to sweep, each ≥ 1
 * @param duration measured time per level
 * @param warmup unmeasured time before each level
 * @param inputShape shape for every input, or null to take each input's shape from the model
 *     metadata (variable dimensions become 1)
 * @param inputDatatype datatype override, or null for the metadata's
 * @param connections gRPC channels (and so server connections) to spread load over; 0 = one per
 *     available processor, capped by the concurrency
 * @param requestCount when positive, each level ends once this many requests were measured (or
 *     when {@code duration} passes first); 0 measures for {@code duration}
 * @param backendsDirectories embedded mode: the folders of backend plugin directories the host
 *     loads (the distribution's {@code backends/} by default, from the command line)
 */
public record BenchOptions(@Nullable String url, @Nullable String grpc, @Nullable Path embeddedRepository,
        @Nullable InferenceService service, String model, long version, List<Integer> concurrency, Duration duration, Duration warmup,
        @Nullable List<Long> inputShape, @Nullable String inputDatatype, int connections,
        long requestCount, List<Path> backendsDirectories) {

    public BenchOptions {
        requireNonNull(model, "model is null");
        concurrency = List.copyOf(concurrency);
        requireNonNull(duration, "duration is null");
        requireNonNull(warmup, "warmup is null");
        inputShape = inputShape == null ? null : List.copyOf(inputShape);
        backendsDirectories = List.copyOf(backendsDirectories);
        int targets = (url != null ? 1 : 0) + (grpc != null ? 1 : 0) + (embeddedRepository != null ? 1 : 0) + (service != null ? 1 : 0);
        if (targets != 1) {
            throw new IllegalArgumentException("give exactly one target: --url, --grpc or --embedded-repository (found " + targets + ")");
        }
        if (concurrency.isEmpty() || concurrency.stream().anyMatch(c -> c < 1)) {
            throw new IllegalArgumentException("concurrency levels must be ≥ 1, got " + concurrency);
        }
        if (requestCount < 0) {
            throw new IllegalArgumentException("request count must be ≥ 0, got " + requestCount);
        }
        if (duration.isZero() || duration.isNegative()) {
            throw new IllegalArgumentException("duration must be positive, got " + duration);
        }
    }

    /** Options for one target with the defaults: concurrency 1, 8, 64; 5 s per level after 1 s warm-up. */
    public static Builder builder(String model) {
        return new Builder(model);
    }

    /** A short description of the target, for reports. */
    public String targetName() {
        if (url != null) {
            return "rest " + url;
        }
        if (grpc != null) {
            return "grpc " + grpc;
        }
        if (embeddedRepository != null) {
            return "embedded " + embeddedRepository;
        }
        return "embedded";
    }

    /** Builds options; not thread-safe. */
    public static final class Builder {
        private final String model;
        private @Nullable String url;
        private @Nullable String grpc;
        private @Nullable Path repository;
        private @Nullable InferenceService service;
        private long version = -1;
        private List<Integer> concurrency = List.of(1, 8, 64);
        private Duration duration = Duration.ofSeconds(5);
        private Duration warmup = Duration.ofSeconds(1);
        private @Nullable List<Long> shape;
        private @Nullable String datatype;
        private int connections;
        private final List<Path> backendsDirectories = new ArrayList<>();
        private long requestCount;

        private Builder(String model) {
            this.model = model;
        }

        public Builder url(String v) {
            url = v;
            return this;
        }

        public Builder grpc(String v) {
            grpc = v;
            return this;
        }

        public Builder embeddedRepository(Path v) {
            repository = v;
            return this;
        }

        public Builder service(InferenceService v) {
            service = v;
            return this;
        }

        public Builder version(long v) {
            version = v;
            return this;
        }

        public Builder concurrency(List<Integer> v) {
            concurrency = new ArrayList<>(v);
            return this;
        }

        public Builder duration(Duration v) {
            duration = v;
            return this;
        }

        public Builder warmup(Duration v) {
            warmup = v;
            return this;
        }

        public Builder inputShape(@Nullable List<Long> v) {
            shape = v;
            return this;
        }

        public Builder inputDatatype(@Nullable String v) {
            datatype = v;
            return this;
        }

        public Builder connections(int v) {
            connections = v;
            return this;
        }

        /** Measure this many requests per level (the duration then is a limit); 0: measure for the duration. */
        public Builder requestCount(long v) {
            requestCount = v;
            return this;
        }

        /** Embedded mode: a folder of backend plugin directories for the host; repeatable. */
        public Builder backendsDirectory(Path v) {
            backendsDirectories.add(v);
            return this;
        }

        public BenchOptions build() {
            return new BenchOptions(url, grpc, repository, service, model, version, concurrency, duration, warmup, shape, datatype, connections,
                    requestCount, backendsDirectories);
        }
    }
}
