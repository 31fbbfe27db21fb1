package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.protocol.inference.GRPCInferenceServiceGrpc;
import io.backplane.protocol.inference.ModelReadyRequest;
import io.backplane.protocol.inference.ServerReadyRequest;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.Frontend;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Readiness of python models as Triton's clients see it, over the real REST and gRPC frontends:
 * the model's own {@code is_ready()} (Triton's python_backend user-defined readiness: plain or
 * coroutine, a non-bool or an exception means NOT READY, a check that outlives its wait is
 * reused by the next query), a stub that is dead or restarting, and {@code --strict-readiness}.
 * The models are {@code api-repository/readiness} and {@code readiness_async}, shaped like
 * Triton's qa readiness models.
 */
class PythonReadinessTest {
    private static final HttpClient CLIENT = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();

    @TempDir
    Path temp;

    @BeforeAll
    static void python() throws Exception {
        PythonApiTest.python();
    }

    @AfterEach
    void nothingLeft() throws Exception {
        PythonApiTest.assertNothingLeft();
    }

    /** Writes {@code name} (a copy of {@code source}) with is_ready() doing {@code value}. */
    private static void model(Path repo, String name, String source, String value, long timeoutMillis, String... extra) throws Exception {
        Path dir = Files.createDirectories(repo.resolve(name).resolve("1"));
        Files.copy(PythonApiTest.API_REPOSITORY.resolve(source).resolve("1/model.py"), dir.resolve("model.py"));
        StringBuilder c = new StringBuilder("""
                name: "%s"
                backend: "python"
                input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
                output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
                instance_group [ { kind: KIND_CPU } ]
                parameters { key: "READINESS_FN_RETURN_VALUE" value: { string_value: "%s" } }
                parameters { key: "readiness_timeout_ms" value: { string_value: "%d" } }
                parameters { key: "heartbeat_interval_ms" value: { string_value: "100" } }
                """.formatted(name, value, timeoutMillis));
        for (int i = 0; i + 1 < extra.length; i += 2) {
            c.append("parameters { key: \"").append(extra[i]).append("\" value: { string_value: \"").append(extra[i + 1]).append("\" } }\n");
        }
        Files.writeString(repo.resolve(name).resolve("config.pbtxt"), c.toString());
    }

    /** The model as a REST client, a gRPC client and the embedded host see its readiness. */
    private record Clients(BackplaneHost host, String rest, GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc) {
        boolean restReady(String model) throws Exception {
            int s = CLIENT.send(HttpRequest.newBuilder(URI.create(rest + "/v2/models/" + model + "/ready")).timeout(Duration.ofSeconds(60)).GET().build(),
                    HttpResponse.BodyHandlers.ofString()).statusCode();
            assertTrue(s == 200 || s == 503 || s == 400, "GET /v2/models/" + model + "/ready: " + s);
            return s == 200;
        }

        boolean serverReady() throws Exception {
            return CLIENT.send(HttpRequest.newBuilder(URI.create(rest + "/v2/health/ready")).timeout(Duration.ofSeconds(60)).GET().build(),
                    HttpResponse.BodyHandlers.ofString()).statusCode() == 200;
        }

        boolean grpcReady(String model) {
            return grpc.withDeadlineAfter(60, TimeUnit.SECONDS).modelReady(ModelReadyRequest.newBuilder().setName(model).build()).getReady();
        }

        boolean grpcServerReady() {
            return grpc.withDeadlineAfter(60, TimeUnit.SECONDS).serverReady(ServerReadyRequest.getDefaultInstance()).getReady();
        }

        /** Ready by all three, or by none (asserted); the answer. */
        boolean ready(String model) throws Exception {
            boolean r = restReady(model);
            assertEquals(r, grpcReady(model), model + ": REST and gRPC agree");
            assertEquals(r, host.isModelReady(model), model + ": REST and the host agree");
            return r;
        }

        void infers(String model) throws Exception {
            InferenceResponse r = host.infer(InferenceRequest.builder(model).input(Tensor.ofFloats("INPUT0", new long[] {2}, 1, 2)).build())
                    .get(60, TimeUnit.SECONDS);
            assertArrayEquals(new float[] {1, 2}, r.output("OUTPUT0").toFloatArray(), model + " serves whatever is_ready() says");
        }
    }

    private interface Body {
        void run(Clients c) throws Exception;
    }

    private static void serve(Path repo, boolean strict, Body body) throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().modelRepository(repo).modelControlMode(ModelControlMode.NONE).strictReadiness(strict)
                .backendOption("python", StubSettings.INTERPRETER, PythonApiTest.PYTHON).build();
                Frontend http = host.frontendFactories().get("http").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")));
                Frontend grpc = host.frontendFactories().get("grpc").create(TestFrontends.context(host, Map.of("host", "127.0.0.1", "port", "0")))) {
            http.start();
            grpc.start();
            URI g = URI.create(grpc.endpoint().contains("://") ? grpc.endpoint() : "grpc://" + grpc.endpoint());
            ManagedChannel channel = Grpc.newChannelBuilderForAddress(g.getHost(), g.getPort(), InsecureChannelCredentials.create()).build();
            try {
                body.run(new Clients(host, http.endpoint(), GRPCInferenceServiceGrpc.newBlockingStub(channel)));
            } finally {
                channel.shutdownNow().awaitTermination(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void isReady_trueFalseRaisesNonBool_reportedOnRestAndGrpc_inferenceUnaffected() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        for (String source : List.of("readiness", "readiness_async")) {
            for (String value : List.of("true", "false", "exception", "non_boolean")) {
                model(repo, source + "_" + value, source, value, 5000);
            }
        }
        serve(repo, true, c -> {
            for (String source : List.of("readiness", "readiness_async")) {
                for (int round = 0; round < 3; round++) {
                    assertTrue(c.ready(source + "_true"), source + ": is_ready() returned True");
                    assertFalse(c.ready(source + "_false"), source + ": is_ready() returned False");
                    assertFalse(c.ready(source + "_exception"), source + ": is_ready() raised");
                    assertFalse(c.ready(source + "_non_boolean"), source + ": is_ready() returned a str");
                }
                for (String value : List.of("true", "false", "exception", "non_boolean")) {
                    c.infers(source + "_" + value);
                }
            }
            assertFalse(c.serverReady(), "strict readiness: models that are not ready make the server not ready");
            assertFalse(c.grpcServerReady());
            assertTrue(Files.readAllLines(repo.resolve("readiness_true/checks")).size() >= 9, "each query ran is_ready()");
        });
    }

    @Test
    void isReady_changesWithoutReload_andStrictReadinessSwitch() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        model(repo, "flag", "readiness", "file", 5000);
        model(repo, "flag_async", "readiness_async", "file", 5000);
        serve(repo, true, c -> {
            assertFalse(c.ready("flag"));
            assertFalse(c.ready("flag_async"));
            assertFalse(c.serverReady());
            Files.createFile(repo.resolve("flag/ready"));
            Files.createFile(repo.resolve("flag_async/ready"));
            assertTrue(c.ready("flag"), "is_ready() is asked again on each query");
            assertTrue(c.ready("flag_async"));
            assertTrue(c.serverReady());
            assertTrue(c.grpcServerReady());
            Files.delete(repo.resolve("flag/ready"));
            assertFalse(c.ready("flag"));
            assertFalse(c.serverReady());
        });
        serve(repo, false, c -> {
            assertFalse(c.ready("flag"));
            assertTrue(c.serverReady(), "--strict-readiness=false: the server is ready whatever its models say");
            assertTrue(c.grpcServerReady());
        });
    }

    /**
     * Triton's is_ready_fn_timeout: a check slower than the wait reports NOT READY; the check goes
     * on in the stub, and the next query takes its answer instead of starting another.
     */
    @Test
    void isReady_slowerThanTheWait_notReadyThenTheNextQueryTakesItsAnswer() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        model(repo, "gate", "readiness", "gate", 2000);
        model(repo, "gate_async", "readiness_async", "gate", 2000);
        serve(repo, true, c -> {
            for (String m : List.of("gate", "gate_async")) {
                assertFalse(c.restReady(m), m + ": is_ready() has not answered within readiness_timeout_ms");
                c.infers(m);
                // is_ready() still waits for 'release': this query joins the check in flight
                java.util.concurrent.CompletableFuture<Boolean> next = c.host().checkModelReady(m, InferenceRequest.LATEST);
                assertFalse(next.isDone(), m + ": the query waits for the check in flight");
                Files.createFile(repo.resolve(m).resolve("release"));
                assertTrue(next.get(60, TimeUnit.SECONDS), m + ": the check in flight answered the next query");
                assertEquals(1, Files.readAllLines(repo.resolve(m).resolve("checks")).size(), m + ": one is_ready() call served both queries");
                assertTrue(c.grpcReady(m), m + ": a later query asks again");
            }
        });
    }

    /** A stub that died and cannot start again: NOT READY everywhere, Triton's text for requests; ready again once it serves. */
    @Test
    void stubDeadAndRestarting_notReadyOnRestAndGrpc_untilItServesAgain() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        model(repo, "fragile", "readiness", "true", 5000, "FAIL_RESTART", "1", "startup_timeout_ms", "20000", "restart_backoff_max_ms", "200");
        serve(repo, true, c -> {
            assertTrue(c.ready("fragile"));
            c.infers("fragile");
            List<ProcessHandle> stubs = Harness.liveStubs();
            assertEquals(1, stubs.size());
            stubs.get(0).destroyForcibly();
            stubs.get(0).onExit().get(30, TimeUnit.SECONDS);
            io.backplane.testkit.Await.until(() -> !c.host().isModelReady("fragile"), Duration.ofSeconds(30), "the host to see the stub gone");
            assertFalse(c.ready("fragile"), "a dead or restarting stub is NOT READY");
            assertFalse(c.serverReady());
            assertFalse(c.grpcServerReady());
            Files.createFile(repo.resolve("fragile/allow_restart"));
            io.backplane.testkit.Await.until(() -> c.host().isModelReady("fragile"), Duration.ofSeconds(60), "the restarted stub to serve");
            assertTrue(c.ready("fragile"), "ready again once the stub serves");
            assertTrue(c.serverReady());
            c.infers("fragile");
        });
    }

    /** Triton's sentence first for a request to an instance whose stub cannot serve, Backplane's hint after it. */
    @Test
    void stubCannotServe_requestFailsWithTritonsSentence() throws Exception {
        Path repo = Files.createDirectories(temp.resolve("repo"));
        model(repo, "fragile", "readiness", "true", 5000, "FAIL_RESTART", "1", "startup_timeout_ms", "5000", "restart_backoff_max_ms", "200");
        serve(repo, true, c -> {
            c.infers("fragile");
            ProcessHandle stub = Harness.liveStubs().get(0);
            stub.destroyForcibly();
            stub.onExit().get(30, TimeUnit.SECONDS);
            io.backplane.testkit.Await.until(() -> !c.host().isModelReady("fragile"), Duration.ofSeconds(30), "the host to see the stub gone");
            ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class, () -> c.host()
                    .infer(InferenceRequest.builder("fragile").input(Tensor.ofFloats("INPUT0", new long[] {1}, 1)).build()).get(60, TimeUnit.SECONDS));
            BackplaneException b = (BackplaneException) e.getCause();
            assertEquals(ErrorCode.UNAVAILABLE, b.code());
            assertTrue(b.getMessage().startsWith("Stub process '") && b.getMessage().contains("' is not healthy. (Backplane: model 'fragile'"),
                    b.getMessage());
        });
    }

    /**
     * Triton's qa model_readiness: a stub killed (SIGKILL, SIGSEGV) leaves its model NOT READY on
     * REST and gRPC, and each of those queries logs Triton's line once, while the restart waits
     * out its backoff (here ten minutes, longer than the test); then requests from many threads,
     * released together, start the restart at once: one restart, every request served. A model
     * with is_ready() and one without.
     */
    @Test
    void stubKilled_notReadyLoggedOncePerQuery_untilRequestsRestartItOnce() throws Exception {
        String[][] cases = {{"with_is_ready", "KILL"}, {"without_is_ready", "SEGV"}};
        for (String[] k : cases) {
            String m = k[0];
            Path repo = Files.createDirectories(temp.resolve("repo-" + m));
            String[] slow = {"restart_backoff_initial_ms", "600000", "restart_backoff_max_ms", "600000"};
            model(repo, m, "readiness", "true", 5000, slow);
            if (m.equals("without_is_ready")) {
                Files.writeString(repo.resolve(m).resolve("1/model.py"), """
                        import triton_python_backend_utils as pb_utils


                        class TritonPythonModel:
                            def execute(self, requests):
                                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0",
                                        pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
                        """);
            }
            ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logs = PythonBackendTest.capture();
            try {
                serve(repo, true, c -> {
                    assertTrue(c.ready(m));
                    c.infers(m);
                    List<ProcessHandle> stubs = Harness.liveStubs();
                    assertEquals(1, stubs.size());
                    Process kill = new ProcessBuilder("kill", "-" + k[1], Long.toString(stubs.get(0).pid())).inheritIO().start();
                    assertEquals(0, kill.waitFor());
                    stubs.get(0).onExit().get(30, TimeUnit.SECONDS);
                    io.backplane.testkit.Await.until(() -> !c.host().isModelReady(m), Duration.ofSeconds(30), "the host to see the stub gone");
                    String line = "Model '" + m + "' version 1 is not ready: Stub process '" + m + "_0_0' is not healthy.";
                    long before = count(logs, line);
                    assertFalse(c.restReady(m), m + ": REST model ready after the kill");
                    assertFalse(c.grpcReady(m), m + ": gRPC model ready after the kill");
                    assertEquals(2, count(logs, line) - before, m + ": Triton's line once per query:\n" + PythonBackendTest.messages(logs));
                    assertFalse(c.serverReady(), "strict readiness: the server is not ready either");

                    int callers = 16;
                    java.util.concurrent.CountDownLatch gate = new java.util.concurrent.CountDownLatch(1);
                    List<java.util.concurrent.CompletableFuture<Void>> calls = new java.util.ArrayList<>();
                    for (int t = 0; t < callers; t++) {
                        float v = t;
                        calls.add(java.util.concurrent.CompletableFuture.runAsync(() -> {
                            try {
                                gate.await();
                                Thread.sleep(java.util.concurrent.ThreadLocalRandom.current().nextInt(20));
                                InferenceResponse r = c.host().infer(InferenceRequest.builder(m)
                                        .input(Tensor.ofFloats("INPUT0", new long[] {2}, v, -v)).build()).get(60, TimeUnit.SECONDS);
                                assertArrayEquals(new float[] {v, -v}, r.output("OUTPUT0").toFloatArray(), "caller " + v + " got its own answer");
                            } catch (Exception e) {
                                throw new java.util.concurrent.CompletionException(e);
                            }
                        }, Thread::startVirtualThread));
                    }
                    gate.countDown();
                    java.util.concurrent.CompletableFuture.allOf(calls.toArray(java.util.concurrent.CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
                    assertEquals(1, count(logs, "a request arrived; restarting its python stub now"), "the requests started the restart");
                    assertEquals(1, count(logs, "python stub restarted (generation 2)"), "one restart for all the callers");
                    assertEquals(1, Harness.liveStubs().size());
                    assertTrue(c.ready(m), m + ": ready again once the stub serves");
                });
            } finally {
                PythonBackendTest.release(logs);
            }
        }
    }

    private static long count(ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logs, String text) {
        return new java.util.ArrayList<>(logs.list).stream().filter(e -> e.getFormattedMessage().contains(text)).count();
    }
}
