package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Stub crashes, stalls and hangs (P3, P4, P5, L8), and host death (P1, P7). */
class StubFaultTest {
    @BeforeAll
    static void python() throws Exception {
        Fakes.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Fakes.assertClean();
    }

    static InferenceRequest slow(float tag, int sleepMs) {
        return InferenceRequest.builder("identity").id("t" + tag).parameter("sleep_ms", (long) sleepMs)
                .input(Tensor.ofFloats("INPUT0", new long[] {2}, tag, -tag)).build();
    }

    static Thread runAsync(Harness h, List<Fakes.Request> reqs) {
        return Thread.ofPlatform().start(() -> {
            try {
                h.instance.execute(List.<ScheduledRequest>copyOf(reqs));
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
    }

    static void assertOk(float tag, InferenceResponse r) {
        assertFalse(r.isError(), r::toString);
        assertArrayEquals(new float[] {tag, -tag}, r.output("OUTPUT0").toFloatArray());
    }

    static void assertInstanceError(InferenceResponse r, String... words) {
        assertTrue(r.isError(), r::toString);
        assertEquals(ErrorCode.UNAVAILABLE, r.error().code(), r.error().getMessage());
        assertTrue(r.error().getMessage().contains("instance 'identity_0'") || r.error().getMessage().contains("instance 'faulty_0'"),
                r.error().getMessage());
        for (String w : words) {
            assertTrue(r.error().getMessage().contains(w), r.error().getMessage());
        }
    }

    @Test
    void sigkill_duringExecute_failsOnceThenRestartsAndNextSucceeds() throws Exception {
        try (Harness h = new Harness(Configs.identity())) {
            long pid = h.stub().pid();
            Fakes.Request r = h.request(slow(1, 3000));
            Thread t = runAsync(h, List.of(r));
            Thread.sleep(300);
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            InferenceResponse resp = r.sender.await();
            t.join();
            assertInstanceError(resp, "signal 9");
            h.awaitReady(30_000);
            assertEquals(2, h.stub().generation());
            assertOk(2, h.run(slow(2, 0)).get(0).sender.await());
            assertEquals(1, r.sender.finals.get());
        }
    }

    @Test
    void osExit_inExecute_failsOnceThenRestartsAndNextSucceeds() throws Exception {
        try (Harness h = new Harness(Configs.faulty())) {
            InferenceResponse resp = h.run(PythonBackendTest.fp32("faulty", "exit", 1)).get(0).sender.await();
            assertInstanceError(resp, "exited with code 3");
            h.awaitReady(30_000);
            assertArrayEquals(new float[] {4}, h.run(PythonBackendTest.fp32("faulty", "ok", 2)).get(0).sender.await().output("OUTPUT0")
                    .toFloatArray());
        }
    }

    /**
     * SIGSTOP mid-execute: the request fails promptly (heartbeat), the instance is not ready, its
     * memory stays quarantined; after SIGCONT the stub finishes the abandoned execution, whose
     * result is dropped, and the same stub serves again.
     */
    @Test
    void sigstop_thenResume_failsPromptlyDropsLateResultAndRecovers() throws Exception {
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.STALL_KILL, "20000"))) {
            long pid = h.stub().pid();
            Fakes.Request r = h.request(slow(1, 600));
            Thread t = runAsync(h, List.of(r));
            Thread.sleep(150);
            Harness.signal(pid, "STOP");
            try {
                InferenceResponse resp = r.sender.await();
                t.join();
                assertInstanceError(resp, "no heartbeat");
                assertFalse(h.instance.isReady());
                assertTrue(h.stub().allocatedBytes() > 0, "the abandoned execution's memory is quarantined, not freed");
                Fakes.Request during = h.run(slow(9, 0)).get(0);
                assertInstanceError(during.sender.await(), "stalled");
            } finally {
                Harness.signal(pid, "CONT");
            }
            h.awaitReady(30_000);
            assertEquals(1, h.stub().generation(), "the resumed stub is kept");
            PythonBackendTest.waitFor(() -> h.stub().droppedMessages() >= 1);
            assertEquals(0, h.stub().allocatedBytes(), "released once the stub ended the execution");
            assertOk(3, h.run(slow(3, 0)).get(0).sender.await());
            assertEquals(1, r.sender.finals.get());
            assertEquals(0, r.sender.responses.stream().filter(x -> !x.isError()).count());
        }
    }

    @Test
    void sigstop_neverResumed_killedAfterDeadlineAndReplaced() throws Exception {
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.STALL_KILL, "500"))) {
            long pid = h.stub().pid();
            Harness.signal(pid, "STOP");
            InferenceResponse resp = h.run(slow(1, 0)).get(0).sender.await();
            assertInstanceError(resp, "no heartbeat");
            h.awaitReady(30_000);
            assertEquals(2, h.stub().generation());
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false));
            assertOk(2, h.run(slow(2, 0)).get(0).sender.await());
        }
    }

    @Test
    void hungInterpreter_executeWatchdog_failsThenKillsAndReplaces() throws Exception {
        try (Harness h = new Harness(Configs.faulty(), Map.of(StubSettings.EXECUTE_TIMEOUT, "500", StubSettings.STALL_KILL, "500"))) {
            InferenceResponse resp = h.run(PythonBackendTest.fp32("faulty", "hang", 1)).get(0).sender.await();
            assertInstanceError(resp, "execute() ran longer than execute_timeout_ms=500");
            h.awaitReady(30_000);
            assertEquals(2, h.stub().generation());
            assertArrayEquals(new float[] {2}, h.run(PythonBackendTest.fp32("faulty", "ok", 1)).get(0).sender.await().output("OUTPUT0")
                    .toFloatArray());
        }
    }

    @Test
    void decoupled_stubKilledWhileSenderOpen_requestFailsOnce() throws Exception {
        try (Harness h = new Harness(Configs.square())) {
            long pid = h.stub().pid();
            Fakes.Request r = h.run(PythonBackendTest.square(100000)).get(0);
            Thread.sleep(100);
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            r.sender.await();
            InferenceResponse last = r.sender.responses.get(r.sender.responses.size() - 1);
            assertTrue(last.isError() && last.error().getMessage().contains("instance 'square_0'"), last::toString);
            h.awaitReady(30_000);
            Fakes.Request next = h.run(PythonBackendTest.square(2)).get(0);
            next.sender.await();
            assertEquals(2, next.sender.responses.size());
        }
    }

    /** kill -9 of the host JVM: its stub notices the closed pipe and exits; the next start reaps its files. */
    @Test
    void hostKilled_stubExitsAndFilesAreReaped() throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Process host = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), StubHostMain.class.getName())
                .redirectErrorStream(true).start();
        long stubPid = -1;
        try (BufferedReader br = new BufferedReader(new InputStreamReader(host.getInputStream()))) {
            String line;
            while ((line = br.readLine()) != null) {
                if (line.startsWith("STUB ")) {
                    stubPid = Long.parseLong(line.substring(5).trim());
                    break;
                }
            }
            assertTrue(stubPid > 0, "the child host printed no stub pid");
            host.destroyForcibly();
            assertTrue(host.waitFor(30, TimeUnit.SECONDS));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (ProcessHandle.of(stubPid).map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertFalse(ProcessHandle.of(stubPid).map(ProcessHandle::isAlive).orElse(false), "stub " + stubPid + " outlived its host");
        } finally {
            host.destroyForcibly();
        }
        SharedRegion.reapStale();
        String prefix = "backplane-" + host.pid() + "-";
        try (var s = Files.list(SharedRegion.SHM_DIR)) {
            assertEquals(List.of(), s.map(Path::getFileName).map(Path::toString).filter(n -> n.startsWith(prefix)).toList());
        }
    }
}
