package io.backplane.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.testkit.Await;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The bench against a real host and its REST and gRPC frontends (short runs; figures are reported, never asserted). */
class BenchTest {
    @Test
    void selfBench_embeddedRestAndGrpc_measureWithoutErrors() throws Exception {
        List<BenchResult> results = SelfBench.run(List.of(1, 4), Duration.ofMillis(400), Duration.ofMillis(200), 16, 1);
        assertEquals(3, results.size());
        assertTrue(results.get(0).target().startsWith("embedded"));
        assertTrue(results.get(1).target().startsWith("rest"));
        assertTrue(results.get(2).target().startsWith("grpc"));
        for (BenchResult r : results) {
            assertEquals(2, r.levels().size());
            for (BenchResult.Level l : r.levels()) {
                assertTrue(l.requests() > 0, r.table());
                assertEquals(0, l.errors(), r.table());
                assertTrue(l.p50Micros() <= l.p99Micros(), r.table());
            }
            assertTrue(r.table().contains("requests/s"));
        }
        Await.until(() -> Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .noneMatch(n -> n.startsWith("backplane-")), Duration.ofSeconds(5), "the host's backplane- threads to end after the run");
    }

    @Test
    void parse_commandLine_buildsOptions() {
        BenchOptions o = Bench.parse("--grpc", "localhost:8001", "--model", "m", "--concurrency", "1,8,64", "--duration-s=2.5",
                "--input-shape", "1,16", "--input-datatype", "fp16", "--model-version", "3");
        assertEquals("localhost:8001", o.grpc());
        assertEquals(List.of(1, 8, 64), o.concurrency());
        assertEquals(Duration.ofMillis(2500), o.duration());
        assertEquals(List.of(1L, 16L), o.inputShape());
        assertEquals("FP16", o.inputDatatype());
        assertEquals(3, o.version());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Bench.parse("--model", "m")).getMessage().contains("exactly one target"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Bench.parse("--url", "http://x")).getMessage().contains("--model"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Bench.parse("--url", "http://x", "--model", "m", "--bogus", "1"))
                .getMessage().contains("--bogus"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Bench.parse("--url", "http://x", "--model", "m", "--concurrency", "0"))
                .getMessage().contains("≥ 1"));
    }
}
