package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.testkit.Await;
import io.backplane.testkit.Reply;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

class PythonBackendTest {
    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void clean() throws Exception {
        Harness.assertClean();
    }

    static InferenceRequest fp32(String model, String mode, float... values) {
        InferenceRequest.Builder b = InferenceRequest.builder(model).id("req-" + mode)
                .input(Tensor.ofFloats("INPUT0", new long[] {values.length}, values));
        if (!mode.isEmpty()) {
            b.parameter("mode", mode);
        }
        return b.build();
    }

    static String message(InferenceResponse r) {
        assertTrue(r.isError(), "expected an error, got " + r);
        return r.error().getMessage();
    }

    @Test
    void addSub_plainRequest_returnsSumAndDifference() throws Exception {
        try (Harness h = new Harness(Configs.addSub())) {
            assertTrue(h.instance().isReady());
            var req = InferenceRequest.builder("add_sub")
                    .input(Tensor.ofFloats("INPUT0", new long[] {4}, 1, 2, 3, 4))
                    .input(Tensor.ofFloats("INPUT1", new long[] {4}, 10, 20, 30, 40)).build();
            for (int i = 0; i < 3; i++) {
                InferenceResponse r = h.run(req).get(0).await();
                assertFalse(r.isError(), r::toString);
                assertArrayEquals(new float[] {11, 22, 33, 44}, r.output("OUTPUT0").toFloatArray());
                assertArrayEquals(new float[] {-9, -18, -27, -36}, r.output("OUTPUT1").toFloatArray());
            }
        }
    }

    @Test
    void addSub_requestedOutputs_onlyThoseReturned() throws Exception {
        try (Harness h = new Harness(Configs.addSub())) {
            var req = InferenceRequest.builder("add_sub").requestOutput("OUTPUT1")
                    .input(Tensor.ofFloats("INPUT0", new long[] {4}, 1, 2, 3, 4))
                    .input(Tensor.ofFloats("INPUT1", new long[] {4}, 1, 1, 1, 1)).build();
            InferenceResponse r = h.run(req).get(0).await();
            assertEquals(1, r.outputs().size());
            assertArrayEquals(new float[] {0, 1, 2, 3}, r.output("OUTPUT1").toFloatArray());
        }
    }

    @Test
    void introspect_argsRequestMetadataAndBytes_matchTriton() throws Exception {
        try (Harness h = new Harness(Configs.introspect())) {
            var req = InferenceRequest.builder("introspect").id("abc").correlationId(77L).sequenceStart(true).parameter("p", "v").parameter("n", 3L)
                    .input(Tensor.ofStrings("TEXT", new long[] {2}, "hello", "wörld")).build();
            InferenceResponse r = h.run(req).get(0).await();
            assertFalse(r.isError(), r::toString);
            assertEquals(List.of("HELLO", "WöRLD"), r.output("UPPER").toStringList(), "bytes.upper() changes ASCII only");
            String info = r.output("INFO").toStringList().get(0);
            assertTrue(info.contains("\"request_id\": \"abc\""), info);
            assertTrue(info.contains("\"correlation_id\": 77"), info);
            assertTrue(info.contains("\"flags\": 1"), info);
            assertTrue(info.contains("\"parameters\": {\"p\": \"v\", \"n\": 3}"), info);
            assertTrue(info.contains("\"model_name\": \"introspect\""), info);
            assertTrue(info.contains("\"model_instance_kind\": \"CPU\""), info);
            assertTrue(info.contains("\"model_instance_name\": \"introspect_0_0\""), info);
            assertTrue(info.contains("\"model_instance_device_id\": \"0\""), info);
            assertTrue(info.contains("\"model_version\": \"1\""), info);
            assertTrue(info.contains("\"model_repository\": \"" + h.harness.modelContext().modelDirectory() + "\""), info);
            assertTrue(info.contains("\"in_cfg_type\": \"TYPE_STRING\""), info);
            assertTrue(info.contains("\"np_type\": \"float32\""), info);
            assertTrue(info.contains("\"triton_type\": 11"), info);
            assertTrue(info.contains("\"text_dtype\": \"object\""), info);
            assertTrue(info.contains("\"cancelled\": false"), info);
        }
    }

    @Test
    void decoupled_squareFromThread_manyResponsesThenFinal() throws Exception {
        try (Harness h = new Harness(Configs.square())) {
            var reqs = List.of(h.send(square(3)), h.send(square(5)), h.send(square(0)));
            int[] counts = {3, 5, 0};
            for (int i = 0; i < 3; i++) {
                Reply s = reqs.get(i);
                s.await();
                assertEquals(counts[i], s.responses().size());
                for (InferenceResponse r : s.responses()) {
                    assertArrayEquals(new int[] {counts[i] * counts[i]}, r.output("OUT").toIntArray());
                }
            }
        }
    }

    /** A request of one row for a batched faulty model: INPUT0 [1, 1]. */
    static InferenceRequest row(String mode, float value) {
        return InferenceRequest.builder("faulty").id("req-" + mode).parameter("mode", mode)
                .input(Tensor.ofFloats("INPUT0", new long[] {1, 1}, value)).build();
    }

    /** A request of one row for a batched square model: IN [1, 1]. */
    static InferenceRequest batchedSquare(int n, String mode) {
        return InferenceRequest.builder("square").input(Tensor.ofInts("IN", new long[] {1, 1}, n)).parameter("mode", mode).id("sq" + n).build();
    }

    static InferenceRequest square(int n) {
        return square(n, "");
    }

    static InferenceRequest square(int n, String mode) {
        return InferenceRequest.builder("square").input(Tensor.ofInts("IN", new long[] {1}, n)).parameter("mode", mode).id("sq" + n).build();
    }

    @Test
    void decoupled_sendAfterFinal_raisesSenderClosed() throws Exception {
        ListAppender<ILoggingEvent> logs = capture();
        try (Harness h = new Harness(Configs.square())) {
            Reply s = h.send(square(2, "send_after_final"));
            s.await();
            waitFor(() -> logs.list.stream().anyMatch(e -> e.getFormattedMessage().contains("probe:")));
            String line = logs.list.stream().map(ILoggingEvent::getFormattedMessage).filter(m -> m.contains("probe:")).findFirst().orElseThrow();
            assertTrue(line.contains("[square/square_0_0]") && line.contains("Unable to send response. Response sender has been closed."), line);
            assertEquals(2, s.responses().size());
        } finally {
            release(logs);
        }
    }

    @Test
    void decoupled_senderHeldByPython_requestReleasedAtFinal() throws Exception {
        try (Harness h = new Harness(Configs.square())) {
            Reply r = h.send(square(1, "hold_sender"));
            r.await();
            assertTrue(r.isDone());
            assertEquals(0, h.harness.host().openRequests(), "the FINAL released the request although Python still holds its sender");
        }
    }

    @Test
    void decoupled_finalThenRaise_errorOnlyToOpenRequests() throws Exception {
        try (Harness h = new Harness(Configs.batched(Configs.square()))) {
            var reqs = h.run(batchedSquare(1, "final_then_raise"), batchedSquare(1, "raise"));
            InferenceResponse first = reqs.get(0).await();
            assertArrayEquals(new int[] {7}, first.output("OUT").toIntArray());
            assertTrue(message(reqs.get(1).await()).contains("square failed on purpose"));
            assertTrue(h.instance().isReady());
        }
    }

    @Test
    void execute_raises_errorToEveryRequestAndModelStaysReady() throws Exception {
        try (Harness h = new Harness(Configs.batched(Configs.faulty()))) {
            for (int i = 0; i < 10; i++) {
                var reqs = h.run(row("raise", 1), row("ok", 2));
                for (var r : reqs) {
                    String m = message(r.await());
                    assertTrue(m.contains("RuntimeError: boom from execute"), m);
                }
                assertTrue(h.instance().isReady());
            }
            InferenceResponse ok = h.run(row("ok", 2)).get(0).await();
            assertArrayEquals(new float[] {4}, ok.output("OUTPUT0").toFloatArray());
            assertEquals(1, h.stub().generation(), "no restart for a Python exception");
        }
    }

    @Test
    void execute_wrongReturns_clearPerRequestErrors() throws Exception {
        try (Harness h = new Harness(Configs.batched(Configs.faulty()))) {
            assertTrue(message(h.run(row("none", 1)).get(0).await()).contains("returned no response for request"));
            assertTrue(message(h.run(row("not_list", 1)).get(0).await()).contains("Expected a list in the execute return, found type"));
            var wrong = h.run(row("wrong_len", 1), row("ok", 1));
            for (var r : wrong) {
                assertTrue(message(r.await()).contains("InferenceRequest(s) size is:2, and InferenceResponse(s) size is:3"));
            }
            var mixed = h.run(row("ok", 1), row("not_response", 2), row("error_response", 3));
            assertArrayEquals(new float[] {2}, mixed.get(0).await().output("OUTPUT0").toFloatArray());
            assertTrue(message(mixed.get(1).await()).contains("found type '<class 'str'>'"));
            InferenceResponse err = mixed.get(2).await();
            assertEquals(ErrorCode.INVALID_ARGUMENT, err.error().code());
            assertEquals("bad input here", err.error().getMessage());
            assertTrue(h.instance().isReady());
        }
    }

    @Test
    void bls_calledFromModel_clearErrorNotCrash() throws Exception {
        try (Harness h = new Harness(Configs.faulty())) {
            String m = message(h.run(fp32("faulty", "bls", 1)).get(0).await());
            assertTrue(m.contains("BLS failed") && m.contains("other"), m); // a BLS call to a model the host does not have
            assertArrayEquals(new float[] {2}, h.run(fp32("faulty", "ok", 1)).get(0).await().output("OUTPUT0").toFloatArray());
        }
    }

    @Test
    void cancellation_whileExecuting_visibleToIsCancelled() throws Exception {
        ListAppender<ILoggingEvent> logs = capture();
        try (Harness h = new Harness(Configs.faulty())) {
            Reply r = h.send(fp32("faulty", "wait_cancel", 1));
            waitFor(() -> messages(logs).contains("faulty: waiting for the cancellation")); // handshake: Python polls is_cancelled()
            assertTrue(r.cancel());
            InferenceResponse resp = r.await();
            assertEquals(ErrorCode.CANCELLED, resp.error().code());
            assertEquals("saw the cancellation", resp.error().getMessage());
        } finally {
            release(logs);
        }
    }

    @Test
    void logging_printLoggerAndStderr_reachSlf4jTagged() throws Exception {
        ListAppender<ILoggingEvent> logs = capture();
        try (Harness h = new Harness(Configs.faulty())) {
            h.run(fp32("faulty", "log", 1)).get(0).await();
            // Three paths reach the log at their own pace (stdout and stderr pipes, the Logger's messages on the
            // channel): wait for every line, not just the pipes' (CI once saw the Logger's line arrive last)
            waitFor(() -> {
                String m = messages(logs);
                return m.contains("hello from stderr") && m.contains("hello from print") && m.contains("hello from Logger")
                        && m.contains("an error line from Logger");
            });
            String all = messages(logs);
            assertTrue(all.contains("[faulty/faulty_0_0] hello from print"), all);
            assertTrue(all.contains("[faulty/faulty_0_0] hello from Logger"), all);
            assertTrue(all.contains("[faulty/faulty_0_0] hello from stderr"), all);
            assertTrue(logs.list.stream().anyMatch(e -> e.getLevel() == ch.qos.logback.classic.Level.ERROR
                    && e.getFormattedMessage().contains("an error line from Logger")));
        } finally {
            release(logs);
        }
    }

    /** Repeated: the stub exits right after sending INIT_ERR, racing the host's read of it. */
    @RepeatedTest(5)
    void initialize_raises_loadFailsWithPythonError() throws Exception {
        BackplaneException e = assertThrows(BackplaneException.class, () -> new Harness(Configs.named("init_fail")).close());
        assertTrue(e.getMessage().contains("ValueError: bad init: weights missing"), e.getMessage());
        assertTrue(e.getMessage().contains("init_fail"), e.getMessage());
    }

    @Test
    void finalize_raises_loggedAndUnloadCompletes() throws Exception {
        ListAppender<ILoggingEvent> logs = capture();
        try {
            Harness h = new Harness(Configs.named("finalize_fail"));
            InferenceResponse r = h.run(fp32("finalize_fail", "", 5)).get(0).await();
            assertArrayEquals(new float[] {5}, r.output("INPUT0").toFloatArray());
            h.close();
            assertTrue(messages(logs).contains("finalize exploded"), messages(logs));
        } finally {
            release(logs);
        }
    }

    @Test
    void missingInterpreter_loadFailsClearly() throws Exception {
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> new Harness(Configs.identity(), Map.of(StubSettings.INTERPRETER, "/nonexistent/python9")).close());
        assertTrue(e.getMessage().contains("cannot start the python interpreter '/nonexistent/python9'"), e.getMessage());
    }

    @Test
    void largePayload_growsRegion_andPastLimitClearErrorThenNextWorks() throws Exception {
        try (Harness h = new Harness(Configs.identity(), Map.of(StubSettings.SHM_INITIAL, "65536", StubSettings.SHM_MAX, "" + (24 << 20)))) {
            float[] big = new float[2 << 20]; // 8 MiB
            for (int i = 0; i < big.length; i++) {
                big[i] = i;
            }
            InferenceResponse r = h.run(fp32("identity", "", big)).get(0).await();
            assertArrayEquals(big, r.output("OUTPUT0").toFloatArray());
            InferenceResponse tooBig = h.run(fp32("identity", "", new float[8 << 20])).get(0).await();
            assertEquals(ErrorCode.TOO_LARGE, tooBig.error().code());
            assertTrue(tooBig.error().getMessage().contains(StubSettings.SHM_MAX), tooBig.error().getMessage());
            assertArrayEquals(new float[] {1, 2}, h.run(fp32("identity", "", 1, 2)).get(0).await().output("OUTPUT0").toFloatArray());
        }
    }

    @Test
    void region_files_privateUnguessableAndUnlinkedOnClose() throws Exception {
        List<Path> files;
        try (Harness h = new Harness(Configs.identity())) {
            h.run(fp32("identity", "", 1)).get(0).await();
            files = Harness.ownShmFiles();
            assertFalse(files.isEmpty());
            for (Path p : files) {
                assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(p)), p.toString());
                assertTrue(p.getFileName().toString().matches("backplane-\\d+-[0-9a-f]{24}-g1-[hs]\\d+"), p.toString());
            }
        }
        for (Path p : files) {
            assertFalse(Files.exists(p), p + " still exists");
        }
    }

    @Test
    void reapStale_fileOfDeadHost_removed() throws Exception {
        Process dead = new ProcessBuilder("true").start();
        dead.waitFor();
        Path stale = SharedRegion.SHM_DIR.resolve("backplane-" + dead.pid() + "-0123456789abcdef01234567-g1-h0");
        Path foreign = SharedRegion.SHM_DIR.resolve("backplane-" + dead.pid() + "-not-ours");
        Files.writeString(stale, "x");
        Files.writeString(foreign, "x");
        try {
            List<String> removed = SharedRegion.reapStale();
            assertTrue(removed.contains(stale.getFileName().toString()));
            assertFalse(Files.exists(stale));
            assertTrue(Files.exists(foreign), "files not named like ours are left alone");
        } finally {
            Files.deleteIfExists(stale);
            Files.deleteIfExists(foreign);
        }
    }

    static ListAppender<ILoggingEvent> capture() {
        ListAppender<ILoggingEvent> a = new ListAppender<>();
        a.list = new java.util.concurrent.CopyOnWriteArrayList<>(); // the stub's reader threads append while a test reads it
        a.start();
        ((Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME)).addAppender(a);
        return a;
    }

    static void release(ListAppender<ILoggingEvent> a) {
        ((Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME)).detachAppender(a);
    }

    static String messages(ListAppender<ILoggingEvent> a) {
        return new ArrayList<>(a.list).stream().map(ILoggingEvent::getFormattedMessage).collect(Collectors.joining("\n"));
    }

    static void waitFor(java.util.function.BooleanSupplier c) {
        Await.until(c, java.time.Duration.ofSeconds(30), "a condition of the test");
    }

    static void assertNotNullResponse(InferenceResponse r) {
        assertNotNull(r);
    }
}
