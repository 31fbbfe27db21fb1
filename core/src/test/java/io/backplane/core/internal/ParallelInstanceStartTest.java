package io.backplane.core.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A version's instances start concurrently, at most {@link ModelVersion#parallelStarts()} at once;
 * one that fails fails the load, interrupts the starts still running, and every instance that was
 * created is closed. Random start delays shuffle the order; the tests synchronise on latches.
 */
@Timeout(120)
class ParallelInstanceStartTest {
    private static final int INSTANCES = 24;

    @TempDir
    Path repo;

    private final StartingBackend backend = new StartingBackend();
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() {
        if (host != null) {
            host.close();
        }
        assertEquals(0, backend.live.size(), "instances created and never closed: " + backend.live);
        assertEquals(0, backend.creating.get(), "a start still running after the load returned");
        Hygiene.assertNoBackplaneThreads();
    }

    private BackplaneHost start() throws IOException {
        Path dir = Files.createDirectories(repo.resolve("m"));
        Files.writeString(dir.resolve("config.pbtxt"), """
                name: "m"
                backend: "starting"
                input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
                instance_group [ { count: %d kind: KIND_CPU } ]
                """.formatted(INSTANCES));
        Files.createDirectories(dir.resolve("1"));
        host = BackplaneHost.builder().backend(backend).modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT).build();
        return host;
    }

    @Test
    void instances_startConcurrently_boundedByThePool_andAllServe() throws Exception {
        BackplaneHost h = start();
        int k = Math.min(INSTANCES, ModelVersion.parallelStarts());
        for (int round = 0; round < 6; round++) {
            backend.reset(k, -1, false);

            h.load("m");

            assertTrue(backend.together.await(0, TimeUnit.SECONDS), "the first " + k + " starts were running at the same time");
            assertEquals(INSTANCES, backend.live.size(), "every instance started");
            assertTrue(backend.peak.get() <= k, "at most " + k + " starts at once, saw " + backend.peak.get());
            assertTrue(h.isModelReady("m"));
            h.unload("m");
            assertEquals(0, backend.live.size(), "unload closed every instance");
        }
    }

    @Test
    void oneInstanceFailing_failsTheLoad_interruptsTheOtherStarts_andClosesEveryCreatedInstance() throws Exception {
        BackplaneHost h = start();
        int k = Math.min(INSTANCES, ModelVersion.parallelStarts());
        for (int round = 0; round < 8; round++) {
            int failing = ThreadLocalRandom.current().nextInt(k); // among the first k, so it runs while others may block
            backend.reset(0, failing, true);

            BackplaneException e = assertThrows(BackplaneException.class, () -> h.load("m"));

            assertTrue(e.getMessage().contains("failed to load") && describe(e).contains("instance " + failing + " has no device"), describe(e));
            assertFalse(h.isModelReady("m"));
            assertEquals(0, backend.live.size(), "the failed load closed every instance it created: " + backend.live);
            assertEquals(0, backend.creating.get(), "no start runs on after the failed load returned");
        }
        backend.reset(0, -1, false);
        h.load("m");
        assertTrue(h.isModelReady("m"), "the next load succeeds");
    }

    private static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            sb.append(c.getMessage()).append(" / ");
        }
        return sb.toString();
    }

    /**
     * createInstance: a random delay, then (when asked) waits until {@code together} has seen k
     * starts; the failing index throws; with {@code blockOthers}, about half the others wait until
     * they are interrupted.
     */
    private static final class StartingBackend implements BackendFactory {
        final Set<String> live = ConcurrentHashMap.newKeySet();
        final AtomicInteger creating = new AtomicInteger();
        final AtomicInteger peak = new AtomicInteger();
        volatile CountDownLatch together = new CountDownLatch(0);
        volatile int failing = -1;
        volatile boolean blockOthers;
        private final AtomicInteger serial = new AtomicInteger();

        void reset(int concurrent, int failIndex, boolean block) {
            peak.set(0);
            together = new CountDownLatch(concurrent);
            failing = failIndex;
            blockOthers = block;
        }

        @Override
        public String name() {
            return "starting";
        }

        @Override
        public Backend create(BackendContext context) {
            return new Backend() {
                @Override
                public Model loadModel(ModelContext ctx) {
                    return new Model() {
                        @Override
                        public ModelInstance createInstance(InstanceContext ictx) throws Exception {
                            int now = creating.incrementAndGet();
                            peak.accumulateAndGet(now, Math::max);
                            try {
                                return create(ictx);
                            } finally {
                                creating.decrementAndGet();
                            }
                        }

                        @Override
                        public void close() {
                        }
                    };
                }

                @Override
                public void close() {
                }
            };
        }

        private ModelInstance create(InstanceContext ictx) throws Exception {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            LockSupport.parkNanos(rnd.nextLong(2_000_000)); // a random start delay: shuffles the order, synchronises nothing
            int index = ictx.index();
            CountDownLatch t = together;
            t.countDown();
            if (!t.await(20, TimeUnit.SECONDS)) {
                throw new IllegalStateException("instance " + index + ": the other starts did not run beside it");
            }
            if (index == failing) {
                throw new IllegalStateException("instance " + index + " has no device");
            }
            if (blockOthers && rnd.nextBoolean()) {
                new CountDownLatch(1).await(); // a stub that never answers its handshake: only the interrupt ends it
            }
            String id = ictx.name() + "#" + serial.incrementAndGet();
            live.add(id);
            return new ModelInstance() {
                @Override
                public void execute(List<ScheduledRequest> batch) {
                    for (ScheduledRequest r : batch) {
                        r.sender().sendFinal(InferenceResponse.of(List.of(r.request().input("IN").withName("OUT"))));
                    }
                }

                @Override
                public void close() {
                    live.remove(id);
                }
            };
        }
    }
}
