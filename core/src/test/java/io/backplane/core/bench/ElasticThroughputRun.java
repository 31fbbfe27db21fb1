package io.backplane.core.bench;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.LoadOverride;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * Throughput of a model that waits 2 ms per execute (a device or a stub) under 8 clients: fixed at 1
 * and at 4 instances, while override loads switch it 1 → 4 → 1, and from 1 instance under its
 * autoscaler. Prints figures, asserts nothing; not part of the normal test run (the name does not
 * match the test pattern). {@code ./mvnw -q -B -pl core -am test -Dtest=ElasticThroughputRun -Dsurefire.failIfNoSpecifiedTests=false}
 */
class ElasticThroughputRun {
    @TempDir
    Path repo;

    static final long WORK_NANOS = TimeUnit.MILLISECONDS.toNanos(2);

    static final class Waiting implements BackendFactory {
        @Override public String name() { return "waiting"; }
        @Override public Backend create(BackendContext c) {
            return new Backend() {
                @Override public Model loadModel(ModelContext ctx) {
                    return new Model() {
                        @Override public ModelInstance createInstance(InstanceContext i) {
                            return new ModelInstance() {
                                @Override public void execute(List<ScheduledRequest> batch) {
                                    LockSupport.parkNanos(WORK_NANOS); // a model that waits (a device, a stub): 2 ms per batch
                                    for (ScheduledRequest r : batch) {
                                        r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN").withName("OUT"))));
                                    }
                                }
                                @Override public void close() { }
                            };
                        }
                        @Override public void close() { }
                    };
                }
                @Override public void close() { }
            };
        }
    }

    String config(int count, String params) {
        return """
                name: "m"
                backend: "waiting"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                instance_group [ { count: %d kind: KIND_CPU } ]
                %s
                """.formatted(count, params);
    }

    double run(BackplaneHost h, long millis, Runnable during) throws Exception {
        return run(h, millis, during, true);
    }

    /** A warm-up (JIT, threads) prints nothing. */
    double warmUp(BackplaneHost h) throws Exception {
        return run(h, 1000, () -> { }, false);
    }

    double run(BackplaneHost h, long millis, Runnable during, boolean print) throws Exception {
        AtomicLong done = new AtomicLong();
        AtomicInteger failed = new AtomicInteger();
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        List<Thread> ts = new ArrayList<>();
        for (int c = 0; c < 8; c++) {
            ts.add(Thread.ofPlatform().start(() -> {
                while (System.nanoTime() < end) {
                    try {
                        h.infer(InferenceRequest.builder("m").input(Tensor.ofLongs("IN", new long[] {1}, 1)).build()).get();
                        done.incrementAndGet();
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            }));
        }
        long t0 = System.nanoTime();
        during.run();
        for (Thread t : ts) t.join();
        double s = (System.nanoTime() - t0) / 1e9;
        if (print) {
            System.err.printf("  %d ok, %d failed in %.2f s: %.0f req/s%n", done.get(), failed.get(), s, done.get() / s);
        }
        return done.get() / s;
    }

    private static void loadTo(BackplaneHost h, int n) {
        h.load("m", new LoadOverride("""
                {"name": "m", "backend": "waiting", "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
                 "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [1]}],
                 "instance_group": [{"count": %d, "kind": "KIND_CPU"}]}""".formatted(n), Map.of()));
    }

    @Test
    void measure() throws Exception {
        ((ch.qos.logback.classic.Logger) LoggerFactory.getLogger("io.backplane")).setLevel(ch.qos.logback.classic.Level.WARN);
        Path dir = Files.createDirectories(repo.resolve("m"));
        Files.createDirectories(dir.resolve("1"));
        boolean onlySwitching = Boolean.getBoolean("bench.onlySwitching");
        for (int count : onlySwitching ? new int[0] : new int[] {1, 4}) {
            Files.writeString(dir.resolve("config.pbtxt"), config(count, ""));
            try (BackplaneHost h = BackplaneHost.builder().backend(new Waiting()).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build()) {
                h.load("m");
                warmUp(h);
                System.err.println("fixed " + count + " instance(s), 8 clients, 2 ms per execute:");
                run(h, 3000, () -> { });
            }
        }
        Files.writeString(dir.resolve("config.pbtxt"), config(1, ""));
        try (BackplaneHost h = BackplaneHost.builder().backend(new Waiting()).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build()) {
            h.load("m");
            warmUp(h);
            System.err.println("1 -> 4 -> 1 -> 4 by override loads every 500 ms, 8 clients (3 s):");
            run(h, 3000, () -> {
                try {
                    for (int i = 0; i < 5; i++) {
                        Thread.sleep(500);
                        int n = i % 2 == 0 ? 4 : 1;
                        long t0 = System.nanoTime();
                        loadTo(h, n);
                        System.err.printf("  load to %d took %.1f ms%n", n, (System.nanoTime() - t0) / 1e6);
                    }
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            });
        }
        if (onlySwitching) {
            return;
        }
        Files.writeString(dir.resolve("config.pbtxt"), config(1, """
                parameters [ { key: "autoscale_min_instances" value { string_value: "1" } },
                             { key: "autoscale_max_instances" value { string_value: "4" } },
                             { key: "autoscale_idle_ms" value { string_value: "1000" } } ]"""));
        try (BackplaneHost h = BackplaneHost.builder().backend(new Waiting()).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build()) {
            h.load("m");
            System.err.println("autoscaler 1..4 (check every 100 ms), 8 clients, first 3 s from 1 instance:");
            run(h, 3000, () -> { });
            System.err.println("  instances now: " + h.statistics("m", 1).getFirst().instances());
        }
    }
}
