package io.backplane.benchmarks;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
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
 * The peer of {@link InProcessBenchmark}: the same work (copy four floats) handed to one worker
 * thread the plainest way Java offers, {@code CompletableFuture.supplyAsync(work, singleThreadExecutor).get()},
 * and called directly. It is the floor of a hand-off to an instance's worker on this machine: run
 * both in one JMH invocation and read the core's cost as the ratio to {@code handOff}, e.g.
 * {@code java -jar benchmarks/target/benchmarks.jar "InProcessBenchmark|HandOffFloorBenchmark" -p callerRuns=false -t 64}.
 */
@State(Scope.Benchmark)
@Fork(value = 1, jvmArgsAppend = {"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class HandOffFloorBenchmark {
    private final float[] in = {1, 2, 3, 4};
    private ExecutorService worker;

    @Setup(Level.Trial)
    public void start() {
        worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "floor-worker");
            t.setDaemon(true);
            return t;
        });
    }

    @TearDown(Level.Trial)
    public void stop() throws InterruptedException {
        worker.shutdown();
        worker.awaitTermination(10, TimeUnit.SECONDS);
    }

    private float[] work() {
        return in.clone();
    }

    @Benchmark
    @BenchmarkMode(Mode.Throughput)
    @OutputTimeUnit(TimeUnit.SECONDS)
    public float[] handOffThroughput() throws Exception {
        return CompletableFuture.supplyAsync(this::work, worker).get();
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    @OutputTimeUnit(TimeUnit.MICROSECONDS)
    public float[] handOffLatency() throws Exception {
        return CompletableFuture.supplyAsync(this::work, worker).get();
    }

    @Benchmark
    @BenchmarkMode(Mode.Throughput)
    @OutputTimeUnit(TimeUnit.SECONDS)
    public float[] directThroughput() {
        return work();
    }
}
