package io.backplane.core.bench;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.TensorConfig;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The sequence batcher's throughput with 64 concurrent sequences on 4 slots (one instance,
 * {@code max_batch_size: 4}), beside the dynamic batcher on the same model and load. The model
 * costs 2 ms + 100 µs × batch, so 4 slots bound it at 4 / 2.4 ms ≈ 1,667 req/s. Each caller is a
 * virtual thread running sequences of 8 requests (start … end) back to back; with the dynamic
 * batcher the same callers send the same requests without sequence ids. A sequence has at most one
 * request in flight (its caller waits for each answer), so a slot is empty from the moment its
 * response leaves until the caller's next request arrives; {@code max_queue_delay_microseconds}
 * lets a batch wait for those.
 *
 * <p>Run: {@code ./mvnw -q -B -pl core -am test -Dtest=SequenceBatchingBenchmarkRun -Dsurefire.failIfNoSpecifiedTests=false}
 * (optional {@code -Dbench.seconds=N}, default 4).
 */
public final class SequenceBatchingBenchmark {
    private static final int SLOTS = 4;
    private static final int CALLERS = 64;
    private static final int LENGTH = 8;

    private SequenceBatchingBenchmark() {
    }

    static void run(PrintStream out, int seconds) throws Exception {
        out.printf(Locale.ROOT, "Backplane sequence batching benchmark: %d s per point, %d cores, load average %.2f, Java %s%n", seconds,
                Runtime.getRuntime().availableProcessors(), ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(), Runtime.version());
        double ideal = SLOTS / 0.0024;
        out.printf(Locale.ROOT, "%d callers, 1 instance, max batch %d, model 2 ms + 100 us x batch: ideal %.0f req/s%n", CALLERS, SLOTS, ideal);
        for (String mode : new String[] {"sequence direct", "sequence oldest", "sequence direct, delay 500 us", "dynamic"}) {
            double[] r = measure(mode, seconds);
            out.printf(Locale.ROOT, "  %-30s %7.0f req/s = %5.1f%% of ideal | mean batch %.2f%n", mode, r[0], 100 * r[0] / ideal, r[1]);
        }
        out.printf(Locale.ROOT, "load average after: %.2f%n", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
    }

    private static double[] measure(String mode, int seconds) throws Exception {
        AtomicLong batches = new AtomicLong();
        AtomicLong items = new AtomicLong();
        ScriptedBackend backend = new ScriptedBackend().on("m", (batch, inst) -> {
            batches.incrementAndGet();
            items.addAndGet(batch.size());
            Thread.sleep(Duration.ofNanos(2_000_000L + 100_000L * batch.size()));
            for (ScheduledRequest r : batch) {
                r.sender().sendFinal(ScriptedBackend.echo(r));
            }
        });
        ModelConfig.Builder config = ModelConfig.builder("m").backend(ScriptedBackend.NAME).maxBatchSize(SLOTS)
                .input(TensorConfig.of("IN", DataType.INT64, 1)).output(TensorConfig.of("OUT", DataType.INT64, 1))
                .instanceGroup(InstanceGroup.of("", 1, InstanceKind.CPU, List.of()));
        boolean sequences = mode.startsWith("sequence");
        if (sequences) {
            config.sequenceBatching(SequenceBatching.builder().strategy(mode.endsWith("oldest") ? SequenceBatching.Strategy.OLDEST
                    : SequenceBatching.Strategy.DIRECT).maxQueueDelayMicros(mode.contains("delay") ? 500 : 0).build());
        } else {
            config.dynamicBatching(DynamicBatching.DEFAULT);
        }
        try (BackplaneHost host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).model(config.build())
                .loadModel("m").build()) {
            long warmEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            long end = warmEnd + TimeUnit.SECONDS.toNanos(seconds);
            AtomicLong done = new AtomicLong();
            long[] startCounts = new long[2];
            try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
                List<Future<?>> fs = new ArrayList<>();
                for (int c = 0; c < CALLERS; c++) {
                    long id = c + 1;
                    fs.add(pool.submit(() -> {
                        long tag = 0;
                        while (true) {
                            for (int i = 0; i < LENGTH; i++) {
                                long now = System.nanoTime();
                                if (now >= end && i == 0) {
                                    return null;
                                }
                                InferenceRequest.Builder b = InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 1}, ++tag));
                                if (sequences) {
                                    b.correlationId(id).sequenceStart(i == 0).sequenceEnd(i == LENGTH - 1);
                                }
                                InferenceResponse r = host.infer(b.build()).get(60, TimeUnit.SECONDS);
                                if (r.output("OUT").toLongArray()[0] != tag) {
                                    throw new AssertionError("a caller got another caller's result");
                                }
                                long t1 = System.nanoTime();
                                if (t1 >= warmEnd && t1 <= end) {
                                    if (done.getAndIncrement() == 0) {
                                        synchronized (startCounts) {
                                            startCounts[0] = batches.get();
                                            startCounts[1] = items.get();
                                        }
                                    }
                                }
                            }
                        }
                    }));
                }
                for (Future<?> f : fs) {
                    f.get(120, TimeUnit.SECONDS);
                }
            }
            long b;
            long it;
            synchronized (startCounts) {
                b = batches.get() - startCounts[0];
                it = items.get() - startCounts[1];
            }
            return new double[] {done.get() / (double) seconds, b == 0 ? 0 : it / (double) b};
        }
    }
}
