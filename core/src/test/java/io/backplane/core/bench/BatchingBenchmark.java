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
import io.backplane.spi.config.TensorConfig;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntToLongFunction;

/**
 * Throughput and latency of the dynamic batcher through the real host, each beside its ideal
 * bound and a baseline with batching off, in the same run.
 *
 * <ol>
 *   <li>64 callers, max batch 32, max delay 1 ms, a model taking 20 ms per batch whatever its
 *       size: ideal 32 / 20 ms = 1,600 req/s at ~40 ms p50.</li>
 *   <li>A model costing 5 ms + 20 µs × batch, max batch 32, under 64, 256 and 1024 callers.</li>
 * </ol>
 * Callers are virtual threads looping {@code infer(...).get()}; each point warms up for 1 s, then
 * counts the completions inside the window (throughput) and their latencies (p50, p99). It also
 * reports how much of the window the instance spent inside {@code execute} and the mean time of
 * one execute: on a loaded machine the model's sleep overshoots, and "busy" separates that from
 * time the batcher leaves the instance idle.
 *
 * <p>Run: {@code ./mvnw -q -B -pl core -am test -Dtest=BatchingBenchmarkRun -Dsurefire.failIfNoSpecifiedTests=false}
 * (optional {@code -Dbench.seconds=N}, default 4 per point).
 */
public final class BatchingBenchmark {
    private static final int MAX_BATCH = 32;
    private static final long DELAY_MICROS = 1000;

    private BatchingBenchmark() {
    }

    /** busyShare: the share of the window the instance spent inside execute; execMs: mean time of one execute. */
    record Result(String label, double rps, double p50Ms, double p99Ms, double meanBatch, double busyShare, double execMs) {
    }

    public static void main(String[] args) throws Exception {
        run(System.out, Integer.getInteger("bench.seconds", 4));
    }

    static void run(PrintStream out, int seconds) throws Exception {
        out.printf(Locale.ROOT, "Backplane batching benchmark: %d s per point, %d cores, Java %s%n", seconds, Runtime.getRuntime().availableProcessors(),
                Runtime.version());
        out.println();
        out.println("(1) 64 callers, max batch 32, max delay 1 ms, model 20 ms per batch (any size), 1 instance");
        double ideal1 = MAX_BATCH / 0.020;
        double bound1 = DELAY_MICROS / 1000.0 + 2 * 20;
        report(out, measure("dynamic", 64, true, b -> 20_000_000L, seconds), ideal1, bound1);
        report(out, measure("batching off", 64, false, b -> 20_000_000L, seconds), 1 / 0.020, 2 * 20);
        out.println();
        out.println("(2) model 5 ms + 20 us x batch, max batch 32, max delay 1 ms, 1 instance");
        IntToLongFunction cost = b -> 5_000_000L + 20_000L * b;
        double batchMs = cost.applyAsLong(MAX_BATCH) / 1e6;
        double ideal2 = MAX_BATCH / (batchMs / 1000);
        for (int callers : new int[] {64, 256, 1024}) {
            // p99 bound: max delay + 2 batch times; past 2 x max batch callers the queue itself adds callers / throughput (Little's law)
            double queueMs = Math.max(0, callers - 2.0 * MAX_BATCH) / ideal2 * 1000;
            report(out, measure("dynamic, " + callers + " callers", callers, true, cost, seconds), ideal2, DELAY_MICROS / 1000.0 + 2 * batchMs + queueMs);
            double offMs = cost.applyAsLong(1) / 1e6;
            report(out, measure("batching off, " + callers + " callers", callers, false, cost, seconds), 1000 / offMs, callers * offMs + offMs);
        }
    }

    private static void report(PrintStream out, Result r, double ideal, double p99BoundMs) {
        out.printf(Locale.ROOT, "  %-28s %7.0f req/s = %5.1f%% of ideal %5.0f | p50 %7.2f ms | p99 %7.2f ms (bound %7.2f%s) | batch %4.1f"
                + " | instance busy %5.1f%%, %.2f ms/execute%n",
                r.label(), r.rps(), 100 * r.rps() / ideal, ideal, r.p50Ms(), r.p99Ms(), p99BoundMs, r.p99Ms() <= p99BoundMs ? ", met" : ", MISSED",
                r.meanBatch(), 100 * r.busyShare(), r.execMs());
    }

    static Result measure(String label, int callers, boolean batching, IntToLongFunction costNanos, int seconds) throws Exception {
        AtomicLong batches = new AtomicLong();
        AtomicLong items = new AtomicLong();
        AtomicLong busy = new AtomicLong();
        ScriptedBackend backend = new ScriptedBackend().on("m", (batch, inst) -> {
            long start = System.nanoTime();
            int size = 0;
            for (ScheduledRequest r : batch) {
                size += r.batchSize();
            }
            batches.incrementAndGet();
            items.addAndGet(size);
            Thread.sleep(Duration.ofNanos(costNanos.applyAsLong(size)));
            ScriptedBackend.ECHO.execute(batch, inst);
            busy.addAndGet(System.nanoTime() - start);
        });
        ModelConfig.Builder config = ModelConfig.builder("m").backend(ScriptedBackend.NAME).maxBatchSize(MAX_BATCH)
                .input(TensorConfig.of("IN", DataType.INT64, 1)).output(TensorConfig.of("OUT", DataType.INT64, 1))
                .instanceGroup(InstanceGroup.of("", 1, InstanceKind.CPU, List.of()));
        if (batching) {
            config.dynamicBatching(DynamicBatching.builder().maxQueueDelayMicros(DELAY_MICROS).build());
        }
        try (BackplaneHost host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).model(config.build())
                .loadModel("m").build()) {
            long warmEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1000);
            long end = warmEnd + TimeUnit.SECONDS.toNanos(seconds);
            List<long[]> latencies = new ArrayList<>();
            AtomicLong measuredBatchesStart = new AtomicLong(-1);
            AtomicLong measuredItemsStart = new AtomicLong(-1);
            AtomicLong busyStart = new AtomicLong(-1);
            AtomicLong busyEnd = new AtomicLong(-1);
            AtomicLong batchesEnd = new AtomicLong(-1);
            try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
                List<Future<long[]>> fs = new ArrayList<>();
                for (int c = 0; c < callers; c++) {
                    long base = c * 10_000_000L;
                    fs.add(pool.submit(() -> {
                        long[] lat = new long[1024];
                        int n = 0;
                        long seq = 0;
                        while (true) {
                            long t0 = System.nanoTime();
                            if (t0 >= end) {
                                if (busyEnd.get() < 0) {
                                    busyEnd.compareAndSet(-1, busy.get());
                                    batchesEnd.compareAndSet(-1, batches.get());
                                }
                                break;
                            }
                            if (t0 >= warmEnd && measuredBatchesStart.get() < 0) {
                                measuredBatchesStart.compareAndSet(-1, batches.get());
                                measuredItemsStart.compareAndSet(-1, items.get());
                                busyStart.compareAndSet(-1, busy.get());
                            }
                            long tag = base + seq++;
                            InferenceRequest req = InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1, 1}, tag)).build();
                            InferenceResponse r = host.infer(req).get(60, TimeUnit.SECONDS);
                            if (r.output("OUT").toLongArray()[0] != tag) {
                                throw new AssertionError("a caller got another caller's result");
                            }
                            long t1 = System.nanoTime();
                            if (t1 >= warmEnd && t1 <= end) { // completions inside the window (a request may start in the warm-up)
                                if (n == lat.length) {
                                    lat = Arrays.copyOf(lat, n * 2);
                                }
                                lat[n++] = t1 - t0;
                            }
                        }
                        return Arrays.copyOf(lat, n);
                    }));
                }
                for (Future<long[]> f : fs) {
                    latencies.add(f.get(120, TimeUnit.SECONDS));
                }
            }
            long total = latencies.stream().mapToLong(a -> a.length).sum();
            long[] all = new long[(int) total];
            int i = 0;
            for (long[] a : latencies) {
                System.arraycopy(a, 0, all, i, a.length);
                i += a.length;
            }
            Arrays.sort(all);
            long b = batches.get() - Math.max(0, measuredBatchesStart.get());
            long it = items.get() - Math.max(0, measuredItemsStart.get());
            long busyNanos = busyEnd.get() - Math.max(0, busyStart.get());
            long execs = batchesEnd.get() - Math.max(0, measuredBatchesStart.get());
            return new Result(label, total / (double) seconds, pct(all, 0.50), pct(all, 0.99), b == 0 ? 0 : it / (double) b,
                    busyNanos / (seconds * 1e9), execs <= 0 ? 0 : busyNanos / 1e6 / execs);
        }
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(q * sorted.length) - 1)] / 1e6;
    }
}
