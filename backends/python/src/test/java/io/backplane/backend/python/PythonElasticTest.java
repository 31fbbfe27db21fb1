package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.LoadOverride;
import io.backplane.testkit.Await;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Instance counts of a Python model changed while it serves (issue 37): real stubs are added and
 * retired in place under load, and a new stub that cannot start (its {@code initialize} raises, or
 * its process exits) leaves the model serving on the stubs it had, with no failed request.
 */
class PythonElasticTest {
    private static final int CLIENTS = 4;

    /** Adds one; {@code initialize} fails while the marker file names a way to fail. */
    private static final String MODEL = """
            import os
            import numpy as np
            import triton_python_backend_utils as pb_utils


            class TritonPythonModel:
                def initialize(self, args):
                    marker = os.path.join(args["model_repository"], "FAIL_NEW_INSTANCES")
                    if os.path.exists(marker):
                        with open(marker) as f:
                            how = f.read().strip()
                        if how == "exit":
                            os._exit(7)
                        raise RuntimeError("told to fail by " + marker)

                def execute(self, requests):
                    out = []
                    for r in requests:
                        x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                        out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x + 1)]))
                    return out
            """;

    @TempDir
    Path temp;

    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicInteger served = new AtomicInteger();
    private final ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
    private final List<Thread> clients = new ArrayList<>();

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        stopClients();
        Harness.assertClean();
    }

    private static String config(int count) {
        return """
                {"name": "grow", "backend": "python",
                 "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
                 "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [1]}],
                 "instance_group": [{"count": %d, "kind": "KIND_CPU"}]}""".formatted(count);
    }

    private Path modelDirectory() throws Exception {
        Path dir = Files.createDirectories(temp.resolve("repo/grow/1")).getParent();
        Files.writeString(dir.resolve("1/model.py"), MODEL);
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "grow"
                backend: "python"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                instance_group [ { count: 1 kind: KIND_CPU } ]
                """);
        return dir;
    }

    private void startClients(BackplaneHost host) {
        for (int i = 0; i < CLIENTS; i++) {
            clients.add(Thread.ofPlatform().name("elastic-client-" + i).start(() -> {
                while (!stop.get()) {
                    long x = ThreadLocalRandom.current().nextLong(1_000_000);
                    try {
                        InferenceResponse r = host.infer(InferenceRequest.builder("grow").input(Tensor.ofLongs("IN", new long[] {1}, x)).build())
                                .get(60, TimeUnit.SECONDS);
                        long y = r.output("OUT").toLongArray()[0];
                        if (y != x + 1) {
                            failures.add("asked " + x + ", answered " + y);
                        }
                        served.incrementAndGet();
                    } catch (Exception e) {
                        failures.add(String.valueOf(e));
                    }
                }
            }));
        }
    }

    private void stopClients() throws InterruptedException {
        stop.set(true);
        for (Thread t : clients) {
            t.join(Duration.ofSeconds(90));
            assertTrue(!t.isAlive(), t.getName() + " did not stop");
        }
        clients.clear();
    }

    /** Waits until the clients have been answered {@code n} more times: the model serves. */
    private void awaitServed(int n) {
        int before = served.get();
        Await.until(() -> served.get() >= before + n || !failures.isEmpty(), Duration.ofSeconds(60), n + " more answers");
        assertEquals(List.of(), List.copyOf(failures));
    }

    private static int instances(BackplaneHost host) {
        return host.statistics("grow", 1).getFirst().instances();
    }

    @Test
    void instancesAddedAndRetiredUnderLoad_failingNewStubsLeaveTheModelServing_noRequestFails() throws Exception {
        Path dir = modelDirectory();
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(dir.getParent()).modelControlMode(ModelControlMode.EXPLICIT)
                .loadModel("grow").build()) {
            startClients(host);
            awaitServed(20);

            // 1 -> 3 -> 1 -> 2: new stubs start beside the serving one, retired ones finish and exit
            for (int count : new int[] {3, 1, 2}) {
                host.load("grow", new LoadOverride(config(count), Map.of()));
                assertEquals(count, instances(host));
                Await.until(() -> Harness.liveStubs().size() == count, Duration.ofSeconds(60), count + " live stubs");
                awaitServed(20);
            }

            // new stubs that raise in initialize, then new stubs whose process exits there
            for (String how : new String[] {"raise", "exit"}) {
                Files.writeString(dir.resolve("FAIL_NEW_INSTANCES"), how);
                BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("grow", new LoadOverride(config(4), Map.of())));
                assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
                assertTrue(e.getMessage().contains("2 of the 2 new instance(s) failed to start") && e.getMessage().contains("serves on 2"),
                        how + ": " + e.getMessage());
                assertTrue(host.isModelReady("grow"));
                assertEquals(2, instances(host));
                assertEquals(2, host.modelConfig("grow", 1).instanceGroups().getFirst().count());
                Await.until(() -> Harness.liveStubs().size() == 2, Duration.ofSeconds(60), "the failed stubs gone, 2 left");
                awaitServed(20);
            }

            Files.delete(dir.resolve("FAIL_NEW_INSTANCES"));
            host.load("grow", new LoadOverride(config(4), Map.of()));
            assertEquals(4, instances(host));
            awaitServed(20);
            stopClients();
            assertEquals(List.of(), List.copyOf(failures));
            assertTrue(served.get() > 0);
        }
    }
}
