package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Await;
import io.backplane.testkit.Reply;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
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
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    static InferenceRequest slow(float tag, int sleepMs) {
        return InferenceRequest.builder("identity").id("t" + tag).parameter("sleep_ms", (long) sleepMs)
                .input(Tensor.ofFloats("INPUT0", new long[] {2}, tag, -tag)).build();
    }

    static void assertOk(float tag, InferenceResponse r) {
        assertFalse(r.isError(), r::toString);
        assertArrayEquals(new float[] {tag, -tag}, r.output("OUTPUT0").toFloatArray());
    }

    static void assertInstanceError(InferenceResponse r, String... words) {
        assertTrue(r.isError(), r::toString);
        assertEquals(ErrorCode.UNAVAILABLE, r.error().code(), r.error().getMessage());
        assertTrue(r.error().getMessage().contains("instance 'identity_0_0'") || r.error().getMessage().contains("instance 'faulty_0_0'"),
                r.error().getMessage());
        for (String w : words) {
            assertTrue(r.error().getMessage().contains(w), r.error().getMessage());
        }
    }

    /** Waits for the identity model's log line "identity: sleeping": the handshake that execute has begun in Python. */
    static void awaitSleeping(ListAppender<ILoggingEvent> logs) {
        PythonBackendTest.waitFor(() -> PythonBackendTest.messages(logs).contains("identity: sleeping"));
    }

    @Test
    void sigkill_duringExecute_failsOnceThenRestartsAndNextSucceeds() throws Exception {
        ListAppender<ILoggingEvent> logs = PythonBackendTest.capture();
        try (Harness h = new Harness(Configs.identity())) {
            long pid = h.stub().pid();
            Reply r = h.send(slow(1, 3000));
            awaitSleeping(logs); // handshake: the model is inside execute
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            InferenceResponse resp = r.await();
            assertInstanceError(resp, "signal 9");
            h.awaitReady(30_000);
            assertEquals(2, h.stub().generation());
            assertOk(2, h.run(slow(2, 0)).get(0).await());
            assertEquals(1, r.terminals());
        } finally {
            PythonBackendTest.release(logs);
        }
    }

    /**
     * Regression (found by FaultInjectionTest on the real core): the stub dies while a batch of
     * several requests executes. The exit handler sets "dead", then fails the open requests one by
     * one; execute, seeing "dead", returned at once, so the core found the later requests of the
     * batch unanswered and ended them with INTERNAL ("returned from execute without answering").
     * Execute now waits until the exit handler has ended all of its requests: each ends once, with
     * the instance's UNAVAILABLE error.
     */
    @Test
    void sigkill_duringBatchedExecute_everyRequestOfTheBatchFailsWithTheStubsError() throws Exception {
        ListAppender<ILoggingEvent> logs = PythonBackendTest.capture();
        try (Harness h = new Harness(Configs.batched(Configs.identity()))) {
            for (int round = 0; round < 5; round++) {
                long pid = h.stub().pid();
                logs.list.clear();
                List<Reply> batch = h.run(row(round, 3000), row(round + 0.25f, 0), row(round + 0.5f, 0));
                awaitSleeping(logs);
                ProcessHandle.of(pid).orElseThrow().destroyForcibly();
                for (Reply r : batch) {
                    assertInstanceError(r.await(), "signal 9");
                    assertEquals(1, r.terminals());
                }
                h.awaitReady(30_000);
            }
        } finally {
            PythonBackendTest.release(logs);
        }
    }

    /** A request of one row for the batched identity model: INPUT0 [1, 2]. */
    static InferenceRequest row(float tag, int sleepMs) {
        return InferenceRequest.builder("identity").id("t" + tag).parameter("sleep_ms", (long) sleepMs)
                .input(Tensor.ofFloats("INPUT0", new long[] {1, 2}, tag, -tag)).build();
    }

    @Test
    void osExit_inExecute_failsOnceThenRestartsAndNextSucceeds() throws Exception {
        try (Harness h = new Harness(Configs.faulty())) {
            InferenceResponse resp = h.run(PythonBackendTest.fp32("faulty", "exit", 1)).get(0).await();
            assertInstanceError(resp, "exited with code 3");
            h.awaitReady(30_000);
            assertArrayEquals(new float[] {4}, h.run(PythonBackendTest.fp32("faulty", "ok", 2)).get(0).await().output("OUTPUT0")
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
        ListAppender<ILoggingEvent> logs = PythonBackendTest.capture();
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.STALL_KILL, "20000"))) {
            long pid = h.stub().pid();
            Reply r = h.send(slow(1, 600));
            awaitSleeping(logs); // handshake: the model is inside execute
            Harness.signal(pid, "STOP");
            try {
                InferenceResponse resp = r.await();
                assertInstanceError(resp, "no heartbeat");
                assertFalse(h.instance().isReady());
                assertTrue(h.stub().allocatedBytes() > 0, "the abandoned execution's memory is quarantined, not freed");
                Reply during = h.run(slow(9, 0)).get(0);
                assertInstanceError(during.await(), "stalled");
            } finally {
                Harness.signal(pid, "CONT");
            }
            h.awaitReady(30_000);
            assertEquals(1, h.stub().generation(), "the resumed stub is kept");
            PythonBackendTest.waitFor(() -> h.stub().droppedMessages() >= 1);
            assertEquals(0, h.stub().allocatedBytes(), "released once the stub ended the execution");
            assertOk(3, h.run(slow(3, 0)).get(0).await());
            assertEquals(1, r.terminals());
            assertEquals(0, r.responses().size(), "the late result of the abandoned execution reached no client");
        } finally {
            PythonBackendTest.release(logs);
        }
    }

    @Test
    void sigstop_neverResumed_killedAfterDeadlineAndReplaced() throws Exception {
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.STALL_KILL, "500"))) {
            long pid = h.stub().pid();
            Harness.signal(pid, "STOP");
            InferenceResponse resp = h.run(slow(1, 0)).get(0).await();
            assertInstanceError(resp, "no heartbeat");
            h.awaitReady(30_000);
            assertEquals(2, h.stub().generation());
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false));
            assertOk(2, h.run(slow(2, 0)).get(0).await());
        }
    }

    @Test
    void hungInterpreter_executeWatchdog_failsThenKillsAndReplaces() throws Exception {
        try (Harness h = new Harness(Configs.faulty(), Map.of(StubSettings.EXECUTE_TIMEOUT, "500", StubSettings.STALL_KILL, "500"))) {
            InferenceResponse resp = h.run(PythonBackendTest.fp32("faulty", "hang", 1)).get(0).await();
            assertInstanceError(resp, "execute() ran longer than execute_timeout_ms=500");
            h.awaitReady(30_000);
            assertEquals(2, h.stub().generation());
            assertArrayEquals(new float[] {2}, h.run(PythonBackendTest.fp32("faulty", "ok", 1)).get(0).await().output("OUTPUT0")
                    .toFloatArray());
        }
    }

    @Test
    void decoupled_stubKilledWhileSenderOpen_requestFailsOnce() throws Exception {
        try (Harness h = new Harness(Configs.square())) {
            long pid = h.stub().pid();
            Reply r = h.send(PythonBackendTest.square(40_000));
            r.awaitResponses(1); // handshake: the sender is open and streaming
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            InferenceResponse last = r.await();
            assertTrue(last.isError() && last.error().getMessage().contains("instance 'square_0_0'"), last::toString);
            assertEquals(1, r.terminals());
            h.awaitReady(30_000);
            Reply next = h.send(PythonBackendTest.square(2));
            next.await();
            assertEquals(2, next.responses().size());
        }
    }

    /** kill -9 of the host JVM: its stub notices the closed pipe and exits; the next start reaps its files. */
    @Test
    void hostKilled_stubExitsAndFilesAreReaped() throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Process host = new ProcessBuilder(java, "-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"), "-cp", System.getProperty("java.class.path"),
                StubHostMain.class.getName())
                .redirectErrorStream(true).start();
        long stubPid = -1;
        StringBuilder output = new StringBuilder();
        try (BufferedReader br = new BufferedReader(new InputStreamReader(host.getInputStream()))) {
            String line;
            while ((line = br.readLine()) != null) {
                if (line.startsWith("STUB ")) {
                    stubPid = Long.parseLong(line.substring(5).trim());
                    break;
                }
                output.append(line).append('\n');
            }
            assertTrue(stubPid > 0, "the child host printed no stub pid:\n" + output);
            host.destroyForcibly();
            assertTrue(host.waitFor(30, TimeUnit.SECONDS));
            long pid = stubPid;
            Await.until(() -> !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), Duration.ofSeconds(10),
                    "stub " + stubPid + " to exit after its host was killed"); // not our child: no exit event to wait on
        } finally {
            host.destroyForcibly();
        }
        List<Path> socketFolders = ownedBy(host.pid());
        assertEquals(1, socketFolders.size(), "the killed host's socket folder: " + socketFolders);
        SharedRegion.reapStale();
        OwnedDirectory.reapStale(socketFolders.getFirst().getParent(), PythonBackend.SOCKET_PREFIX);
        String prefix = "backplane-" + host.pid() + "-";
        try (var s = Files.list(SharedRegion.SHM_DIR)) {
            assertEquals(List.of(), s.map(Path::getFileName).map(Path::toString).filter(n -> n.startsWith(prefix)).toList());
        }
        assertEquals(List.of(), ownedBy(host.pid()), "socket folders of the killed host left after the reap");
    }

    /** The socket folders marked as {@code pid}'s, where this JVM's python backend puts its own. */
    private static List<Path> ownedBy(long pid) throws Exception {
        Path tmp = Path.of(System.getProperty("java.io.tmpdir")).toAbsolutePath();
        Path parent = tmp.toString().length() > 56 ? Path.of("/tmp") : tmp;
        try (var s = Files.newDirectoryStream(parent, PythonBackend.SOCKET_PREFIX + "*")) {
            List<Path> out = new java.util.ArrayList<>();
            for (Path d : s) {
                Path mark = d.resolve(OwnedDirectory.MARK);
                if (Files.isReadable(mark) && Files.readString(mark).startsWith(pid + " ")) {
                    out.add(d);
                }
            }
            return out;
        }
    }
}
