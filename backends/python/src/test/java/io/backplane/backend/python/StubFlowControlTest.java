package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Reply;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The stub's control connection under a decoupled flood (issue 15 item 2): before full-duplex
 * IPC, the stub's main thread blocked in a socket write holding the send lock, its reader waited
 * for that lock to answer a heartbeat and stopped reading, and the host's reader blocked writing
 * an ACK, so the stub was declared hung and killed. Now neither side holds a lock across a
 * blocking write and responses are paced by credits, so every response arrives and the stub
 * keeps its generation.
 */
class StubFlowControlTest {
    private static final int RESPONSES = 20_000;
    private static final int DATA_BYTES = 64 << 20;

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    @Test
    void decoupledFlood_largeInputWhileCpuBusy_everyResponseArrivesAndStubIsNeverKilled() throws Exception {
        // A heartbeat every 5 ms keeps pings crossing the flood; the deadlock never recovered, so the
        // default 5 s timeout catches it while a merely starved reader (load from other builds) answers in time.
        Map<String, String> opts = Map.of(StubSettings.HEARTBEAT_INTERVAL, "5", StubSettings.HEARTBEAT_TIMEOUT, "5000",
                StubSettings.STALL_KILL, "5000");
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> burners = new ArrayList<>();
        try (Harness h = new Harness(Configs.flood(), opts)) {
            for (int i = 0; i < Runtime.getRuntime().availableProcessors(); i++) {
                burners.add(Thread.ofPlatform().daemon().name("flood-test-burner-" + i).start(() -> {
                    long x = 0;
                    while (!stop.get()) {
                        x += System.nanoTime() & 1;
                    }
                    if (x == -1) {
                        throw new AssertionError();
                    }
                }));
            }
            InferenceRequest req = InferenceRequest.builder("flood").id("flood")
                    .input(Tensor.ofInts("IN", new long[] {1}, RESPONSES))
                    .input(Tensor.ofRaw("DATA", DataType.UINT8, new long[] {DATA_BYTES}, new byte[DATA_BYTES])).build();
            Reply s = h.send(req);
            InferenceResponse last = s.await();
            stop.set(true);
            assertNull(last.error(), () -> "the flood ended with an error: " + last.error());
            List<InferenceResponse> got = s.responses();
            assertEquals(RESPONSES, got.size());
            for (int i = 0; i < RESPONSES; i += 997) {
                assertArrayEquals(new int[] {i, DATA_BYTES}, got.get(i).output("OUT").toIntArray());
            }
            assertEquals(1, h.stub().generation(), "the stub was restarted during the flood");
            assertTrue(h.instance().isReady());
        } finally {
            stop.set(true);
            for (Thread t : burners) {
                t.join();
            }
        }
    }
}
