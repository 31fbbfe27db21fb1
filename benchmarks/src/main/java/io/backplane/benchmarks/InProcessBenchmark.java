package io.backplane.benchmarks;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.testkit.IdentityBackendFactory;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The in-process path of the core: the testkit's identity backend, batch 1, through
 * {@link BackplaneHost#infer}. Run with 1, 2 and 64 threads:
 * {@code java -jar benchmarks/target/benchmarks.jar InProcessBenchmark -t 64}.
 * Sample mode gives the per-request latency distribution (p50 = the overhead, since the backend
 * does nothing); throughput mode gives requests per second.
 */
@State(Scope.Benchmark)
@Fork(value = 1, jvmArgsAppend = {"--sun-misc-unsafe-memory-access=allow", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class InProcessBenchmark {
    @Param({"1"})
    public int instances;

    /** Run on the caller's thread when an instance is idle (BackplaneHost.Builder.callerRuns). */
    @Param({"false", "true"})
    public boolean callerRuns;

    private BackplaneHost host;
    private InferenceRequest request;

    @Setup(Level.Trial)
    public void start() {
        ModelConfig config = ModelConfig.builder("identity").backend(IdentityBackendFactory.NAME).input(TensorConfig.of("IN", DataType.FP32, 4))
                .output(TensorConfig.of("OUT", DataType.FP32, 4)).instanceGroup(InstanceGroup.of("", instances, InstanceKind.CPU, List.of())).build();
        host = BackplaneHost.builder().backend(new IdentityBackendFactory()).callerRuns(callerRuns).model(config).build();
        request = InferenceRequest.builder("identity").input(Tensor.ofFloats("IN", new long[] {4}, 1, 2, 3, 4)).build();
    }

    @TearDown(Level.Trial)
    public void stop() {
        host.close();
    }

    @Benchmark
    @BenchmarkMode(Mode.Throughput)
    @OutputTimeUnit(TimeUnit.SECONDS)
    public InferenceResponse throughput() throws Exception {
        return host.infer(request).get();
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    @OutputTimeUnit(TimeUnit.MICROSECONDS)
    public InferenceResponse latency() throws Exception {
        return host.infer(request).get();
    }
}
