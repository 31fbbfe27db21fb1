package io.backplane.samples.embedded;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.ResponseObserver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * An application embedding Backplane: it builds a host, loads models, runs a request, streams a
 * decoupled one, and unloads. Models are defined in code and served by {@link CalcBackendFactory},
 * so it needs no Python; with {@code --plugins DIR} it also loads the textops backend from a
 * plugin directory and runs its model; with {@code --repository DIR --load NAME} it serves models
 * of a Triton-layout repository.
 *
 * <pre>
 * ./mvnw -q -B -pl samples/embedded-host -am package -DskipTests -Dsample.run
 * </pre>
 */
public final class EmbeddedHostApp {
    private EmbeddedHostApp() {
    }

    /** What to run. */
    public record Options(@Nullable Path plugins, @Nullable Path repository, List<String> load) {
        public Options {
            load = List.copyOf(load);
        }

        static Options parse(String... args) {
            Path plugins = null;
            Path repository = null;
            List<String> load = new ArrayList<>();
            for (int i = 0; i < args.length; i++) {
                String value = i + 1 < args.length ? args[i + 1] : null;
                switch (args[i]) {
                    case "--plugins" -> plugins = Path.of(required(args[i], value));
                    case "--repository" -> repository = Path.of(required(args[i], value));
                    case "--load" -> load.add(required(args[i], value));
                    default -> throw new IllegalArgumentException("unknown argument '" + args[i] + "'; use --plugins DIR, --repository DIR, --load MODEL");
                }
                i++;
            }
            return new Options(plugins, repository, load);
        }

        private static String required(String flag, @Nullable String value) {
            if (value == null) {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            return value;
        }
    }

    /** The textops model served from the plugin directory, when one is given. */
    public static ModelConfig shout() {
        return ModelConfig.builder("shout").backend("textops").parameter("op", "upper").input(TensorConfig.of("TEXT", DataType.BYTES, 1))
                .output(TensorConfig.of("RESULT", DataType.BYTES, 1)).build();
    }

    public static void main(String[] args) throws Exception {
        run(Options.parse(args), System.out::println);
    }

    /** Runs the sample; every line of its report goes to {@code out}. */
    public static void run(Options options, Consumer<String> out) throws Exception {
        boolean withPlugin = options.plugins() != null && Files.isDirectory(options.plugins().resolve("textops"));
        // a repository's add_sub (e.g. samples/models, Triton's Python example) replaces the one defined in code
        boolean repositoryAddSub = options.repository() != null && Files.isRegularFile(options.repository().resolve("add_sub/config.pbtxt"));
        BackplaneHost.Builder builder = BackplaneHost.builder()
                .modelControlMode(ModelControlMode.EXPLICIT)
                .unloadTimeout(Duration.ofSeconds(5))
                .backend(new CalcBackendFactory())
                .model(CalcBackendFactory.countdown()).loadModel("countdown");
        if (!repositoryAddSub) {
            builder.model(CalcBackendFactory.addSub()).loadModel("add_sub");
        } else if (!options.load().contains("add_sub")) {
            builder.loadModel("add_sub");
        }
        if (options.plugins() != null && Files.isDirectory(options.plugins())) {
            builder.backendsDirectory(options.plugins());
        }
        if (withPlugin) {
            builder.model(shout()).loadModel("shout");
        }
        if (options.repository() != null) {
            builder.modelRepository(options.repository());
            options.load().forEach(builder::loadModel);
        }
        try (BackplaneHost host = builder.build()) {
            out.accept("backends: " + host.backends());
            out.accept("models: " + host.repositoryIndex());

            // infer: one request, one response
            InferenceRequest addSub = InferenceRequest.builder("add_sub").id("add-1")
                    .input(Tensor.ofFloats("INPUT0", new long[] {4}, 1, 2, 3, 4))
                    .input(Tensor.ofFloats("INPUT1", new long[] {4}, 10, 20, 30, 40)).build();
            InferenceResponse r = host.infer(addSub).get(10, TimeUnit.SECONDS);
            out.accept("add_sub OUTPUT0 = " + Arrays.toString(r.output("OUTPUT0").toFloatArray()));
            out.accept("add_sub OUTPUT1 = " + Arrays.toString(r.output("OUTPUT1").toFloatArray()));

            // stream: a decoupled model sends several responses, then completes
            CompletableFuture<List<Integer>> streamed = new CompletableFuture<>();
            List<Integer> seen = new ArrayList<>();
            host.stream(InferenceRequest.builder("countdown").input(Tensor.ofInts("IN", new long[] {1}, 3)).build(), new ResponseObserver() {
                @Override
                public void onResponse(InferenceResponse response) {
                    seen.add(response.output("OUT").toIntArray()[0]);
                }

                @Override
                public void onComplete() {
                    streamed.complete(List.copyOf(seen));
                }

                @Override
                public void onError(BackplaneException error) {
                    streamed.completeExceptionally(error);
                }
            });
            out.accept("countdown streamed " + streamed.get(10, TimeUnit.SECONDS));

            if (withPlugin) {
                InferenceResponse s = host.infer(InferenceRequest.builder("shout").input(Tensor.ofStrings("TEXT", new long[] {1}, "hello plugin")).build())
                        .get(10, TimeUnit.SECONDS);
                out.accept("shout RESULT = " + s.output("RESULT").toStringList() + " (the plugin sees Guava "
                        + s.parameters().get("textops.guava.version") + ")");
            }
            for (String m : options.load()) {
                out.accept(m + " ready: " + host.isModelReady(m) + ", metadata: " + host.metadata(m));
            }

            // unload: every open request of the model ends; the model then rejects new ones
            host.unload("add_sub");
            out.accept("add_sub ready after unload: " + host.isModelReady("add_sub"));
        }
        out.accept("host closed");
    }
}
