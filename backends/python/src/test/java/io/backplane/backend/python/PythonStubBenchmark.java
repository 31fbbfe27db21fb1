package io.backplane.backend.python;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.ModelConfig;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Round-trip latency and throughput of the python stub (JUnit-free). Run with
 * {@code ./mvnw -q -B -pl backends/python -am -Pbench -DskipTests verify}.
 *
 * <p>Through the real core ({@code ModelHarness}). Latency: one caller sends requests in a loop
 * (core, scheduler, the host side of the stub protocol and the stub; identity model). Throughput:
 * 8 callers; "dynamic batcher" serves a copy of the model with max_batch_size 8 and dynamic
 * batching, "unbatched" executes one request at a time.
 */
public final class PythonStubBenchmark {
    private PythonStubBenchmark() {
    }

    @SuppressWarnings("SystemOut")
    public static void main(String[] args) throws Exception {
        Harness.requirePython();
        Map<String, String> defaults = Map.of(StubSettings.HEARTBEAT_INTERVAL, "500", StubSettings.HEARTBEAT_TIMEOUT, "5000");
        try (Harness h = new Harness(Configs.identity(), defaults, false)) {
            out(latency(h, "tiny 4 x FP32", 4, 3_000, 20_000));
            out(latency(h, "1 MiB FP32", 262_144, 200, 1_000));
            out(throughput(h, false));
            out(idleCpu(h));
        }
        ModelConfig batched = Configs.identity().toBuilder().maxBatchSize(8).dynamicBatching(DynamicBatching.DEFAULT).build();
        try (Harness h = new Harness(batched, defaults, false)) {
            out(throughput(h, true));
        }
        Harness.assertClean();
    }

    private static void out(String s) {
        System.out.println(s);
    }

    private static InferenceRequest request(Harness h, float[] data) {
        long[] shape = h.config.batches() ? new long[] {1, data.length} : new long[] {data.length};
        return InferenceRequest.builder("identity").input(Tensor.ofFloats("INPUT0", shape, data)).build();
    }

    private static String latency(Harness h, String name, int elements, int warmup, int n) throws Exception {
        float[] data = new float[elements];
        Arrays.fill(data, 1.5f);
        long[] t = new long[n];
        for (int i = -warmup; i < n; i++) {
            InferenceRequest r = request(h, data);
            long t0 = System.nanoTime();
            InferenceResponse resp = h.send(r).await();
            long t1 = System.nanoTime();
            if (i >= 0) {
                t[i] = t1 - t0;
            }
            if (resp.isError() || resp.output("OUTPUT0").byteSize() != elements * 4L) {
                throw new IllegalStateException("bad response " + resp);
            }
        }
        Arrays.sort(t);
        return String.format(Locale.ROOT, "%-16s 1 caller: p50 %8.1f us  p99 %8.1f us  (n=%d)", name, t[n / 2] / 1e3, t[n * 99 / 100] / 1e3, n);
    }

    /** 8 callers in a loop for 3 s after 1 s of warm-up; the model's own batcher forms the batches. */
    private static String throughput(Harness h, boolean batched) throws Exception {
        int callers = 8;
        float[] data = {1, 2, 3, 4};
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong done = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < callers; c++) {
            threads.add(Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    try {
                        if (h.send(request(h, data)).await().isError()) {
                            throw new IllegalStateException("a benchmark request failed");
                        }
                    } catch (InterruptedException e) {
                        return;
                    }
                    done.incrementAndGet();
                }
            }));
        }
        Thread.sleep(1000);
        long c0 = done.get();
        long t0 = System.nanoTime();
        Thread.sleep(Duration.ofSeconds(3));
        long c1 = done.get();
        long t1 = System.nanoTime();
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        return String.format(Locale.ROOT, "tiny 4 x FP32    %d callers, %s: %,.0f requests/s", callers,
                batched ? "dynamic batcher (<= 8 per execute)" : "unbatched (1 per execute)", (c1 - c0) / ((t1 - t0) / 1e9));
    }

    private static String idleCpu(Harness h) throws Exception {
        Thread.sleep(1500);
        ProcessHandle stub = ProcessHandle.of(h.stub().pid()).orElseThrow();
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long s0 = stub.info().totalCpuDuration().orElseThrow().toNanos();
        long j0 = os.getProcessCpuTime();
        long b0 = backplaneThreadsCpu();
        Thread.sleep(5000);
        long s1 = stub.info().totalCpuDuration().orElseThrow().toNanos();
        long j1 = os.getProcessCpuTime();
        long b1 = backplaneThreadsCpu();
        return String.format(Locale.ROOT, "idle 5 s: stub CPU %.1f ms, backplane-* threads CPU %.1f ms (whole JVM incl. JIT/GC %.1f ms)",
                (s1 - s0) / 1e6, (b1 - b0) / 1e6, (j1 - j0) / 1e6);
    }

    private static long backplaneThreadsCpu() {
        var mx = ManagementFactory.getThreadMXBean();
        long sum = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("backplane-")) {
                sum += Math.max(0, mx.getThreadCpuTime(t.threadId()));
            }
        }
        return sum;
    }
}
