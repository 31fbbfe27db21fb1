package io.backplane.benchmarks;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.config.BackendCatalog;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.Frontend;
import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import io.backplane.testkit.IdentityBackendFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * An ensemble of two trivial steps (the testkit's identity backend: {@code IN → a → t → b → OUT})
 * beside the client calling the two models one after the other, side by side in one run, in
 * process ({@link BackplaneHost#infer}) and over the REST frontend on loopback:
 * {@code java -jar benchmarks/target/benchmarks.jar EnsembleBenchmark}. The ensemble saves the
 * client a round trip per step; in process it costs one more request (the ensemble's own).
 * The {@code embeddedCallerRuns_*} pair runs the same in a host with
 * {@link BackplaneHost.Builder#callerRuns caller-runs}, where idle steps run on the caller's thread.
 */
@State(Scope.Benchmark)
@Fork(value = 1, jvmArgsAppend = {"--sun-misc-unsafe-memory-access=allow", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class EnsembleBenchmark {
    private static final Pattern DATA = Pattern.compile("\"data\"\\s*:\\s*\\[([^\\]]*)\\]");

    private BackplaneHost host;
    private BackplaneHost callerRunsHost;
    private Frontend http;
    private String base;
    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    private InferenceRequest ensembleRequest;
    private InferenceRequest firstRequest;

    private static ModelConfig step(String name) {
        return ModelConfig.builder(name).backend(IdentityBackendFactory.NAME).input(TensorConfig.of("IN", DataType.FP32, 4))
                .output(TensorConfig.of("OUT", DataType.FP32, 4)).build();
    }

    @Setup(Level.Trial)
    public void start() throws Exception {
        ModelConfig ensemble = ModelConfigParser.parse("""
                name: "ens" platform: "ensemble"
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
                ensemble_scheduling { step [
                  { model_name: "a" input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "t" } },
                  { model_name: "b" input_map { key: "IN" value: "t" } output_map { key: "OUT" value: "OUT" } } ] }
                """, "ens/config.pbtxt", "ens", BackendCatalog.NONE);
        host = BackplaneHost.builder().backend(new IdentityBackendFactory()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(step("a")).model(step("b")).model(ensemble).loadModel("ens").build();
        callerRunsHost = BackplaneHost.builder().backend(new IdentityBackendFactory()).modelControlMode(ModelControlMode.EXPLICIT).callerRuns(true)
                .model(step("a")).model(step("b")).model(ensemble).loadModel("ens").build();
        http = host.frontendFactories().get("http").create(new FrontendContext() {
            @Override
            public InferenceService service() {
                return host;
            }

            @Override
            public Map<String, String> options() {
                return Map.of("host", "127.0.0.1", "port", "0");
            }
        });
        http.start();
        base = http.endpoint();
        Tensor in = Tensor.ofFloats("IN", new long[] {4}, 1, 2, 3, 4);
        ensembleRequest = InferenceRequest.builder("ens").input(in).build();
        firstRequest = InferenceRequest.builder("a").input(in).build();
    }

    @TearDown(Level.Trial)
    public void stop() throws Exception {
        http.close();
        host.close();
        callerRunsHost.close();
    }

    @Benchmark
    public InferenceResponse embedded_ensemble() throws Exception {
        return host.infer(ensembleRequest).get();
    }

    @Benchmark
    public InferenceResponse embedded_twoClientCalls() throws Exception {
        InferenceResponse a = host.infer(firstRequest).get();
        return host.infer(InferenceRequest.builder("b").input(a.output("OUT").withName("IN")).build()).get();
    }

    @Benchmark
    public InferenceResponse embeddedCallerRuns_ensemble() throws Exception {
        return callerRunsHost.infer(ensembleRequest).get();
    }

    @Benchmark
    public InferenceResponse embeddedCallerRuns_twoClientCalls() throws Exception {
        InferenceResponse a = callerRunsHost.infer(firstRequest).get();
        return callerRunsHost.infer(InferenceRequest.builder("b").input(a.output("OUT").withName("IN")).build()).get();
    }

    @Benchmark
    public String rest_ensemble() throws Exception {
        return post("ens", "1,2,3,4");
    }

    @Benchmark
    public String rest_twoClientCalls() throws Exception {
        String a = post("a", "1,2,3,4");
        Matcher m = DATA.matcher(a);
        if (!m.find()) {
            throw new IllegalStateException("no data in " + a);
        }
        return post("b", m.group(1));
    }

    private String post(String model, String data) throws Exception {
        HttpResponse<String> r = client.send(HttpRequest.newBuilder(URI.create(base + "/v2/models/" + model + "/infer"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"inputs\":[{\"name\":\"IN\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[" + data + "]}]}"))
                .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new IllegalStateException(model + ": HTTP " + r.statusCode() + " " + r.body());
        }
        return r.body();
    }
}
