package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.RequestHandle;
import io.backplane.spi.host.ResponseObserver;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The rest of Triton's python_backend API through the real host and real stubs: the response
 * sender's rules, coroutine execute, auto-complete, parameters, tensors (DLPack, BF16, bytes,
 * optional inputs), model-code isolation and execution environments. The models are under
 * {@code src/test/resources/api-repository}, written the way Triton's examples and qa models use
 * the API.
 */
class PythonApiTest {
    static final Path API_REPOSITORY = Path.of("src/test/resources/api-repository").toAbsolutePath();
    static final int RETURN = 0, SEND_FINAL = 1, SEND_THEN_FINAL = 2, SEND_LATER = 3, FINAL_ONLY = 4, SEND_TWICE = 5,
            SEND_AND_RETURN = 6, NOTHING = 7, EXIT = 8, INTERRUPT = 9, PARAMETERS = 10, ECHO = 11, RAISE_ERROR = 12,
            HOLD_SENDER = 13, DROP_SENDER = 14, SEND_THEN_DROP = 15;

    /** The interpreter the stubs run (BACKPLANE_TEST_PYTHON, default python3): point it at one with torch to run the torch paths. */
    static final String PYTHON = System.getenv().getOrDefault("BACKPLANE_TEST_PYTHON", "python3");

    @TempDir
    Path temp;

    @BeforeAll
    static void python() throws Exception {
        Process p;
        try {
            p = new ProcessBuilder(PYTHON, "-c", "import numpy").redirectErrorStream(true).start();
        } catch (IOException e) {
            throw new AssertionError("these tests need python3 with numpy on PATH: " + e.getMessage(), e);
        }
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "these tests need python3 with numpy on PATH: " + out);
    }

    @AfterEach
    void nothingLeft() throws Exception {
        assertNothingLeft();
    }

    /** No stub of this JVM alive, no shared-memory file of this JVM left. */
    static void assertNothingLeft() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while ((!stubs().isEmpty() || !shmFiles().isEmpty()) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(List.of(), stubs().stream().map(p -> p.pid() + " " + p.info().commandLine().orElse("")).toList(), "stubs left");
        assertEquals(List.of(), shmFiles(), "shared-memory files left");
    }

    private static List<ProcessHandle> stubs() {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().commandLine().orElse("").contains("backplane_stub.py")).toList();
    }

    private static List<Path> shmFiles() throws IOException {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(SharedRegion.SHM_DIR, "backplane-" + ProcessHandle.current().pid() + "-*")) {
            ds.forEach(out::add);
        }
        return out;
    }

    Path repository(String... models) throws IOException {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        for (String m : models) {
            Path from = API_REPOSITORY.resolve(m);
            try (Stream<Path> files = Files.walk(from)) {
                for (Path f : files.toList()) {
                    Path to = repo.resolve(m).resolve(from.relativize(f).toString());
                    if (Files.isDirectory(f)) {
                        Files.createDirectories(to);
                    } else {
                        Files.copy(f, to, StandardCopyOption.REPLACE_EXISTING);
                    }
                }
            }
        }
        return repo;
    }

    private BackplaneHost host(Path repo) {
        return BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .backendOption("python", StubSettings.INTERPRETER, PYTHON).build();
    }

    private static InferenceRequest mode(String model, int mode) {
        return InferenceRequest.builder(model).input(Tensor.ofInts("MODE", new long[] {1}, mode)).build();
    }

    private static InferenceResponse infer(BackplaneHost host, InferenceRequest r) throws Exception {
        return host.infer(r).get(60, TimeUnit.SECONDS);
    }

    private static BackplaneException failure(BackplaneHost host, InferenceRequest r) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> host.infer(r).get(60, TimeUnit.SECONDS));
        return assertInstanceOfBackplane(e.getCause());
    }

    private static BackplaneException assertInstanceOfBackplane(Throwable t) {
        assertTrue(t instanceof BackplaneException, "expected a BackplaneException, got " + t);
        return (BackplaneException) t;
    }

    private static int out(InferenceResponse r) {
        return r.output("OUT").toIntArray()[0];
    }

    private static JsonNode seen(InferenceResponse r) throws IOException {
        return StubJson.MAPPER.readTree((String) r.parameters().get("seen"));
    }

    @Test
    void responseSender_plainModel_answersEveryWayTritonAllows() throws Exception {
        try (BackplaneHost host = host(repository("sender", "sender_async"))) {
            for (String model : List.of("sender", "sender_async")) {
                host.load(model);
                assertEquals(1, out(infer(host, mode(model, RETURN))), model);
                assertEquals(2, out(infer(host, mode(model, SEND_FINAL))), model);
                assertEquals(3, out(infer(host, mode(model, SEND_THEN_FINAL))), model);
                assertEquals(4, out(infer(host, mode(model, SEND_LATER))), model + ": response and FINAL after execute returned");
                assertEquals(7, out(infer(host, mode(model, SEND_AND_RETURN))), model + ": the sent response wins");
                assertEquals(0, host.openRequests());
            }
        }
    }

    @Test
    void responseSender_plainModelBreaksTheRules_getsTritonsErrors() throws Exception {
        try (BackplaneHost host = host(repository("sender", "sender_async"))) {
            for (String model : List.of("sender", "sender_async")) {
                host.load(model);
                BackplaneException e = failure(host, mode(model, FINAL_ONLY));
                assertTrue(e.getMessage().contains("Unable to send response. Non-decoupled model cannot send complete final before sending a response."),
                        e.getMessage());
                assertEquals(6, out(infer(host, mode(model, SEND_TWICE))), model + ": the first response reaches the client");
                e = failure(host, mode(model, NOTHING));
                assertTrue(e.getMessage().contains("returned no response for request") && e.getMessage().contains("response sender"), e.getMessage());
                e = failure(host, mode(model, RAISE_ERROR));
                assertEquals(ErrorCode.NOT_FOUND, e.code(), "TritonError.NOT_FOUND maps to NOT_FOUND");
                assertTrue(e.getMessage().contains("no such thing"), e.getMessage());
            }
        }
    }

    @Test
    void responseSender_plainRequestNeverAnswered_unloadEndsItWithinTheDeadline() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repository("sender")).modelControlMode(ModelControlMode.EXPLICIT)
                .backendOption("python", StubSettings.INTERPRETER, PYTHON).unloadTimeout(Duration.ofMillis(500)).build()) {
            host.load("sender");
            CompletableFuture<InferenceResponse> held = host.infer(mode("sender", HOLD_SENDER));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (host.openRequests() == 0 && System.nanoTime() < deadline) {
                LockSupport.parkNanos(1_000_000);
            }
            host.unload("sender");
            ExecutionException e = assertThrows(ExecutionException.class, () -> held.get(60, TimeUnit.SECONDS));
            assertEquals(ErrorCode.UNAVAILABLE, assertInstanceOfBackplane(e.getCause()).code(), e.getCause().getMessage());
            assertEquals(0, host.openRequests());
        }
    }

    @Test
    void responseSender_droppedWithoutFinal_requestEndsInsteadOfHanging() throws Exception {
        try (BackplaneHost host = host(repository("sender"))) {
            host.load("sender");
            BackplaneException e = failure(host, mode("sender", DROP_SENDER));
            assertTrue(e.getMessage().contains("was garbage-collected before it sent the FINAL flag"), e.getMessage());
            assertEquals(15, out(infer(host, mode("sender", SEND_THEN_DROP))), "the one response sent becomes the FINAL");
            assertEquals(1, out(infer(host, mode("sender", RETURN))));
        }
    }

    @Test
    void responseSender_plainRequestNeverAnswered_cancelEndsIt() throws Exception {
        try (BackplaneHost host = host(repository("sender"))) {
            host.load("sender");
            CompletableFuture<InferenceResponse> held = host.infer(mode("sender", HOLD_SENDER));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (host.openRequests() == 0 && System.nanoTime() < deadline) {
                LockSupport.parkNanos(1_000_000);
            }
            held.cancel(true);
            while (host.openRequests() != 0 && System.nanoTime() < deadline) {
                LockSupport.parkNanos(1_000_000);
            }
            assertEquals(0, host.openRequests(), "the cancelled request ended");
            assertEquals(1, out(infer(host, mode("sender", RETURN))), "the instance serves the next request");
        }
    }

    @Test
    void lifecycle_everyInitializedInstanceIsFinalizedOnce() throws Exception {
        Path repo = repository("init_del");
        try (BackplaneHost host = host(repo)) {
            for (int round = 0; round < 2; round++) {
                host.load("init_del");
                infer(host, InferenceRequest.builder("init_del").input(Tensor.ofInts("X", new long[] {1}, round)).build());
                host.unload("init_del");
            }
        }
        assertEquals(4, Files.readString(repo.resolve("init_del/initialize.count")).length(), "2 instances × 2 loads");
        assertEquals(4, Files.readString(repo.resolve("init_del/finalize.count")).length());
    }

    @Test
    void modelCode_systemExitAndKeyboardInterrupt_failTheRequestAndTheStubLivesOn() throws Exception {
        try (BackplaneHost host = host(repository("sender", "sender_async"))) {
            for (String model : List.of("sender", "sender_async")) {
                host.load(model);
                long pid = seen(infer(host, mode(model, ECHO))).get("pid").asLong();
                BackplaneException e = failure(host, mode(model, EXIT));
                assertTrue(e.getMessage().contains("Failed to process the request(s) for model '" + model + "'")
                        && e.getMessage().contains("SystemExit: 3"), e.getMessage());
                e = failure(host, mode(model, INTERRUPT));
                assertTrue(e.getMessage().contains("KeyboardInterrupt: stop"), e.getMessage());
                assertEquals(pid, seen(infer(host, mode(model, ECHO))).get("pid").asLong(), model + ": the same stub serves on");
            }
        }
    }

    @Test
    void parameters_requestAndResponse_reachModelAndClient() throws Exception {
        try (BackplaneHost host = host(repository("sender"))) {
            host.load("sender");
            InferenceResponse r = infer(host, mode("sender", PARAMETERS));
            assertEquals(Map.of("text", "ten", "count", 10L, "flag", true), r.parameters());
            InferenceRequest withParams = mode("sender", ECHO).toBuilder().parameter("color", "red").parameter("size", 3).build();
            JsonNode seen = seen(infer(host, withParams));
            assertEquals("red", seen.get("request_parameters").get("color").asText());
            assertEquals(3, seen.get("request_parameters").get("size").asInt());
            assertEquals("[\"\"]", seen.get("argv").toString(), "sys.argv is what an embedded interpreter has, not the stub's flags");
        }
    }

    private static InferenceRequest waitFor(int wait) {
        return InferenceRequest.builder("stream_async").input(Tensor.ofInts("WAIT", new long[] {1}, wait)).build();
    }

    @Test
    void asyncExecute_decoupled_requestsCompleteConcurrently() throws Exception {
        try (BackplaneHost host = host(repository("stream_async"))) {
            host.load("stream_async");
            Streamed first = new Streamed();
            RequestHandle h = host.stream(waitFor(1), first);
            assertEquals(100, out(first.next()), "the first request is parked on the event loop");
            assertTrue(!h.isDone());
            Streamed second = new Streamed();
            host.stream(waitFor(0), second);
            InferenceResponse released = second.next();
            assertEquals(200, out(released));
            assertEquals(Map.of("released", true), released.parameters(), "decoupled responses carry their parameters");
            assertNull(second.end.get(60, TimeUnit.SECONDS));
            assertEquals(101, out(first.next()), "the second request released the first one: they ran at once");
            assertNull(first.end.get(60, TimeUnit.SECONDS));

            Streamed broken = new Streamed();
            host.stream(waitFor(2), broken);
            assertEquals(300, out(broken.next()));
            BackplaneException e = broken.end.get(60, TimeUnit.SECONDS);
            assertNotNull(e, "a coroutine that raises ends its open requests with the error");
            assertTrue(e.getMessage().contains("ValueError: broken coroutine"), e.getMessage());

            Streamed returning = new Streamed();
            host.stream(waitFor(3), returning);
            e = returning.end.get(60, TimeUnit.SECONDS);
            assertNotNull(e);
            assertTrue(e.getMessage().contains("is using the decoupled mode and the execute function must return None."), e.getMessage());
            assertEquals(0, host.openRequests());
        }
    }

    @Test
    void asyncExecute_decoupledStreamsUntilCancelled_endsAndServesOn() throws Exception {
        try (BackplaneHost host = host(repository("stream_async"))) {
            host.load("stream_async");
            Streamed s = new Streamed();
            RequestHandle h = host.stream(waitFor(4), s);
            assertEquals(500, out(s.next()));
            assertEquals(500, out(s.next()));
            assertTrue(h.cancel());
            BackplaneException e = s.end.get(60, TimeUnit.SECONDS); // the model saw is_cancelled() and sent its FINAL
            assertTrue(e == null || e.code() == ErrorCode.CANCELLED, String.valueOf(e));
            assertTrue(h.isDone());
            Streamed next = new Streamed();
            host.stream(waitFor(0), next);
            assertEquals(200, out(next.next()), "the model serves on");
            assertNull(next.end.get(60, TimeUnit.SECONDS));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (host.openRequests() != 0 && System.nanoTime() < deadline) {
                LockSupport.parkNanos(1_000_000);
            }
            assertEquals(0, host.openRequests());
        }
    }

    @Test
    void autoComplete_modelPyWithoutConfig_loadsWithTheCompletedConfig() throws Exception {
        try (BackplaneHost host = host(repository("completed"))) {
            host.load("completed");
            ModelConfig c = host.modelConfig("completed", 1);
            assertEquals(8, c.maxBatchSize());
            assertNotNull(c.dynamicBatching(), "set_dynamic_batching() took effect");
            assertEquals(List.of("INPUT0", "INPUT1"), c.inputs().stream().map(t -> t.name()).toList());
            assertTrue(c.inputs().get(1).optional());
            assertEquals(DataType.FP32, c.outputs().get(0).dataType());
            InferenceResponse r = infer(host, InferenceRequest.builder("completed")
                    .input(Tensor.ofFloats("INPUT0", new long[] {1, 4}, 1, 2, 3, 4)).build()); // the optional input left out
            assertArrayEquals(new float[] {1, 2, 3, 4}, r.output("OUTPUT0").toFloatArray());
            JsonNode seen = seen(r);
            assertEquals("[\"INPUT0\",\"INPUT1\"]", seen.get("inputs").toString(), "initialize() got the completed config");
            assertEquals(8, seen.get("max_batch_size").asInt());
            assertTrue(seen.get("dynamic_batching").asBoolean());
        }
    }

    @Test
    void autoComplete_setsTheDecoupledPolicy_modelStreams() throws Exception {
        try (BackplaneHost host = host(repository("completed_stream"))) {
            host.load("completed_stream");
            assertTrue(host.modelConfig("completed_stream", 1).decoupled());
            Streamed s = new Streamed();
            host.stream(InferenceRequest.builder("completed_stream").input(Tensor.ofInts("N", new long[] {1}, 5)).build(), s);
            assertEquals(5, out(s.next()));
            assertEquals(6, out(s.next()));
            assertNull(s.end.get(60, TimeUnit.SECONDS));
        }
    }

    @Test
    void autoComplete_pythonError_failsTheLoadWithTheError() throws Exception {
        try (BackplaneHost host = host(repository("completed_bad"))) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("completed_bad"));
            assertTrue(e.getMessage().contains("auto_complete_config() failed: NameError: name 'undefined_variable' is not defined"),
                    e.getMessage());
        }
    }

    @Test
    void tensors_dlpackBf16FixedBytesOptional_asTritonExposesThem() throws Exception {
        boolean torch = hasTorch();
        try (BackplaneHost host = host(repository("tensors"))) {
            host.load("tensors");
            byte[] bf16 = {(byte) 0x80, 0x3f, 0x00, 0x40, 0x40, 0x40}; // 1.0, 2.0, 3.0 as bfloat16
            InferenceRequest.Builder b = InferenceRequest.builder("tensors")
                    .input(Tensor.ofFloats("F", new long[] {2, 3}, 1, 2, 3, 4, 5, 6))
                    .input(Tensor.ofRaw("H", DataType.BF16, new long[] {3}, bf16))
                    .input(Tensor.ofStrings("S", new long[] {2}, "ab", "cde"));
            InferenceResponse r = infer(host, b.build());
            assertArrayEquals(new float[] {1, 4, 2, 5, 3, 6}, r.output("F_T").toFloatArray(), "a non-contiguous output is sent in C order");
            assertEquals(List.of("AB", "CDE"), r.output("S_OUT").toStringList(), "fixed-length numpy bytes become BYTES");
            assertArrayEquals(new int[] {-1}, r.output("O_SEEN").toIntArray(), "an optional input left out is None");
            if (torch) {
                assertEquals(DataType.BF16, r.output("H_OUT").dataType());
                assertArrayEquals(bf16, r.output("H_OUT").toByteArray());
            } else {
                assertNull(r.output("H_OUT"), "without torch the model cannot export BF16");
            }
            r = infer(host, b.input(Tensor.ofInts("O", new long[] {1}, 5)).build());
            assertArrayEquals(new int[] {5}, r.output("O_SEEN").toIntArray());
        }
    }

    @Test
    void pbUtils_unittestInsideTheStub_passes() throws Exception {
        try (BackplaneHost host = host(repository("selftest"))) {
            host.load("selftest");
            InferenceResponse r = infer(host, InferenceRequest.builder("selftest").input(Tensor.ofBooleans("RUN", new long[] {1}, true)).build());
            String report = r.output("REPORT").toStringList().get(0);
            assertTrue(r.output("PASSED").toBooleanArray()[0], report);
            assertTrue(report.contains("Ran 9 tests"), report);
        }
    }

    static boolean hasTorch() throws Exception {
        return new ProcessBuilder(PYTHON, "-c", "import torch").start().waitFor() == 0;
    }

    @Test
    void torch_cpuTensorsThroughDlpack_addSub() throws Exception {
        Assumptions.assumeTrue(hasTorch(), "torch is not importable by " + PYTHON + " (set BACKPLANE_TEST_PYTHON to an interpreter with torch)");
        try (BackplaneHost host = host(repository("torch_add_sub"))) {
            host.load("torch_add_sub");
            InferenceResponse r = infer(host, InferenceRequest.builder("torch_add_sub")
                    .input(Tensor.ofFloats("INPUT0", new long[] {4}, 1, 2, 3, 4)).input(Tensor.ofFloats("INPUT1", new long[] {4}, 1, 1, 1, 1)).build());
            assertArrayEquals(new float[] {2, 3, 4, 5}, r.output("OUTPUT0").toFloatArray());
            assertArrayEquals(new float[] {0, 1, 2, 3}, r.output("OUTPUT1").toFloatArray());
        }
    }

    @Test
    void modelCode_raiseInInitialize_clientReadsErrorAndPlace_tracebackWithSourceOnlyInTheLogDetail() throws Exception {
        try (BackplaneHost host = host(repository("init_raise"))) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("init_raise"));
            assertTrue(e.getMessage().contains("initialize() failed: ValueError: no weights at /models/weights.bin (at model.py:4 in check)"),
                    e.getMessage());
            assertFalse(e.getMessage().contains("source-line-marker") || e.getMessage().contains("Traceback"),
                    "a client never reads a source line: " + e.getMessage());
            assertTrue(String.valueOf(e.logDetail()).contains("Traceback") && String.valueOf(e.logDetail()).contains("source-line-marker-7f3a"),
                    "the host's log gets the traceback: " + e.logDetail());
        }
    }

    @Test
    void modelCode_exitInInitialize_failsTheLoadWithAClearError() throws Exception {
        try (BackplaneHost host = host(repository("init_exit"))) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("init_exit"));
            assertTrue(e.getMessage().contains("initialize() failed: SystemExit: initialize gave up"), e.getMessage());
        }
    }

    @Test
    void executionEnvironment_tarGzOfAVenv_runsTheStubsInIt() throws Exception {
        Path repo = repository("in_env");
        Path venv = temp.resolve("venv");
        run(PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", venv.toString());
        run("python3", "-c", "import sys, tarfile\nwith tarfile.open(sys.argv[1], 'w:gz') as t: t.add(sys.argv[2], arcname='.')",
                repo.resolve("in_env/env.tar.gz").toString(), venv.toString());
        ExecutionEnvironments.deleteTree(venv); // the stubs must use the unpacked copy
        try (BackplaneHost host = host(repo)) {
            host.load("in_env");
            InferenceResponse r = infer(host, InferenceRequest.builder("in_env").input(Tensor.ofInts("X", new long[] {1}, 9)).build());
            assertArrayEquals(new int[] {9}, r.output("Y").toIntArray());
            String prefix = (String) r.parameters().get("prefix");
            assertTrue(prefix.contains("envs") && prefix.contains("env-"), "the stub runs in the unpacked environment: " + prefix);
        }
    }

    @Test
    void executionEnvironment_badArchive_failsTheLoadNamingIt() throws Exception {
        Path repo = repository("in_env");
        Files.writeString(repo.resolve("in_env/env.tar.gz"), "not a tar.gz");
        try (BackplaneHost host = host(repo)) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("in_env"));
            assertTrue(e.getMessage().contains("cannot unpack the execution environment") && e.getMessage().contains("env.tar.gz"),
                    e.getMessage());
        }
    }

    @Test
    void executionEnvironment_archiveWritingThroughASymlink_isRefused() throws Exception {
        Path repo = repository("in_env");
        Path outside = Files.createDirectories(temp.resolve("outside"));
        run(PYTHON, "-c", String.join("\n",
                "import io, sys, tarfile",
                "with tarfile.open(sys.argv[1], 'w:gz') as t:",
                "    link = tarfile.TarInfo('escape'); link.type = tarfile.SYMTYPE; link.linkname = sys.argv[2]; t.addfile(link)",
                "    data = b'x'; f = tarfile.TarInfo('escape/pwned'); f.size = len(data); t.addfile(f, io.BytesIO(data))"),
                repo.resolve("in_env/env.tar.gz").toString(), outside.toString());
        try (BackplaneHost host = host(repo)) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("in_env"));
            assertTrue(e.getMessage().contains("entry 'escape/pwned' points outside the archive's folder"), e.getMessage());
        }
        assertFalse(Files.exists(outside.resolve("pwned")), "nothing was written outside the environment's folder");
    }

    /** A model.py that is a link out of the repository: refused before any stub starts, naming the link; the host's option serves it. */
    @Test
    void modelPy_linkOutOfTheRepository_isRefusedNamingTheLink_unlessAllowed() throws Exception {
        Path repo = repository("in_env");
        Path dir = repo.resolve("in_env");
        Files.writeString(dir.resolve("config.pbtxt"), Files.readString(dir.resolve("config.pbtxt")).replaceAll("(?m)^parameters.*$", ""));
        Path outside = Files.createDirectories(temp.resolve("outside"));
        Files.move(dir.resolve("1/model.py"), outside.resolve("model.py"));
        Files.createSymbolicLink(dir.resolve("1/model.py"), outside.resolve("model.py"));
        try (BackplaneHost host = host(repo)) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("in_env"));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains(dir.resolve("1/model.py") + " is a symbolic link to " + outside.resolve("model.py"))
                    && e.getMessage().contains("outside the model repository " + repo)
                    && e.getMessage().contains("copy it into the model repository, or start the server with --allow-links-outside-repository"),
                    e.getMessage());
            assertTrue(stubs().isEmpty(), "no stub started");
        }
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .backendOption("python", StubSettings.INTERPRETER, PYTHON).allowLinksOutsideRepository(true).build()) {
            host.load("in_env");
            assertArrayEquals(new int[] {4}, infer(host, InferenceRequest.builder("in_env").input(Tensor.ofInts("X", new long[] {1}, 4)).build())
                    .output("Y").toIntArray());
        }
    }

    /**
     * EXECUTION_ENV_PATH may be an absolute path: outside the repository it is refused by default,
     * naming the parameter and the path; the host's option lets the stubs run in it (here an
     * unpacked environment whose bin/python3 is the test's interpreter).
     */
    @Test
    void executionEnvironment_absolutePathOutsideTheRepository_isRefusedUnlessAllowed() throws Exception {
        Path repo = repository("in_env");
        Path env = Files.createDirectories(temp.resolve("outside/env/bin"));
        Process which = new ProcessBuilder(PYTHON, "-c", "import sys; print(sys.executable)").start();
        String executable = new String(which.getInputStream().readAllBytes()).strip();
        assertTrue(which.waitFor(60, TimeUnit.SECONDS) && which.exitValue() == 0 && !executable.isEmpty(), executable);
        Files.createSymbolicLink(env.resolve("python3"), Path.of(executable));
        Path config = repo.resolve("in_env/config.pbtxt");
        Files.writeString(config, Files.readString(config).replace("$$TRITON_MODEL_DIRECTORY/env.tar.gz", env.getParent().toString()));
        try (BackplaneHost host = host(repo)) {
            BackplaneException e = assertThrows(BackplaneException.class, () -> host.load("in_env"));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("parameter EXECUTION_ENV_PATH '" + env.getParent() + "' " + env.getParent()
                    + " is outside the model repository " + repo) && e.getMessage().contains("--allow-links-outside-repository"), e.getMessage());
            assertTrue(stubs().isEmpty(), "no stub started");
        }
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.EXPLICIT)
                .backendOption("python", StubSettings.INTERPRETER, PYTHON).allowLinksOutsideRepository(true).build()) {
            host.load("in_env");
            InferenceResponse r = infer(host, InferenceRequest.builder("in_env").input(Tensor.ofInts("X", new long[] {1}, 5)).build());
            assertArrayEquals(new int[] {5}, r.output("Y").toIntArray());
            assertEquals(env.resolve("python3").toString(), r.parameters().get("executable"), "the stub ran the environment's interpreter");
        }
    }

    private static void run(String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, String.join(" ", command) + ": " + out);
    }

}
