package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.backplane.core.BackplaneHost;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.ResponseObserver;
import io.backplane.testkit.Await;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;

/**
 * {@code backplane serve} run in-process with the fake "http" and "grpc" frontends from test
 * resources: started with the options the flags give, their bound ports logged, closed (before
 * the host) on shutdown, nothing left running.
 */
class ServeCommandTest {
    @TempDir
    Path dir;

    private final StringWriter err = new StringWriter();
    private final ListAppender<ILoggingEvent> logs = new ListAppender<>();
    private final Logger backplaneLogger = (Logger) LoggerFactory.getLogger("io.backplane");
    private final Logger serverLogger = (Logger) LoggerFactory.getLogger(Server.class);
    private Level serverLevel;

    @BeforeEach
    void setUp() throws Exception {
        FakeFrontends.reset();
        Files.createDirectories(dir.resolve("repo"));
        serverLevel = serverLogger.getLevel();
        serverLogger.setLevel(Level.INFO);
        logs.start();
        serverLogger.addAppender(logs);
    }

    @AfterEach
    void tearDown() {
        serverLogger.detachAppender(logs);
        serverLogger.setLevel(serverLevel);
        FakeFrontends.reset();
        Hygiene.assertNoBackplaneThreads();
    }

    /** Runs serve on its own thread; returns the server once started, and the exit code future. */
    private record Run(CompletableFuture<Server> started, CompletableFuture<Integer> exit, Thread thread) {
    }

    private Run serve(String... args) {
        return serve(b -> b, args);
    }

    private Run serve(UnaryOperator<BackplaneHost.Builder> customize, String... args) {
        CompletableFuture<Server> started = new CompletableFuture<>();
        CompletableFuture<Integer> exit = new CompletableFuture<>();
        CommandLine cl = Main.commandLine(dir, null, customize, started::complete);
        cl.setErr(new PrintWriter(err, true));
        String[] all = new String[args.length + 1];
        all[0] = "serve";
        System.arraycopy(args, 0, all, 1, args.length);
        Thread t = Thread.ofPlatform().name("serve-test").start(() -> {
            try {
                exit.complete(cl.execute(all));
            } catch (Throwable e) {
                exit.completeExceptionally(e);
            }
        });
        return new Run(started, exit, t);
    }

    private static FakeFrontends.Fake fake(String name) {
        List<FakeFrontends.Fake> f = FakeFrontends.CREATED.stream().filter(x -> x.name.equals(name)).toList();
        assertEquals(1, f.size(), "fakes named " + name + ": " + FakeFrontends.CREATED);
        return f.get(0);
    }

    /** A model whose file links out of the repository: refused by default, naming the link; --allow-links-outside-repository serves it. */
    @Test
    void serve_modelLinkingOutOfTheRepository_refusedUnlessAllowLinksOutsideRepository() throws Exception {
        Path model = Files.createDirectories(dir.resolve("repo/linked/1"));
        Files.writeString(model.getParent().resolve("config.pbtxt"), """
                name: "linked"
                backend: "scripted"
                input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
                output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]
                """);
        Path outside = Files.writeString(Files.createDirectories(dir.resolve("outside")).resolve("weights"), "v1");
        Files.createSymbolicLink(model.resolve("weights"), outside);
        for (boolean allowed : new boolean[] {false, true}) {
            ScriptedBackend backend = new ScriptedBackend();
            Run run = serve(b -> b.backend(backend), "--model-repository", "repo", "--model-control-mode", "explicit", "--http-port", "0",
                    "--grpc-port", "-1", "--allow-links-outside-repository=" + allowed);
            Server server = run.started().get(60, TimeUnit.SECONDS);
            try {
                if (allowed) {
                    server.host().load("linked");
                    assertEquals(3L, ScriptedBackend.tagOf(server.host().infer(ScriptedBackend.request("linked", 3)).get(30, TimeUnit.SECONDS)));
                } else {
                    BackplaneException e = org.junit.jupiter.api.Assertions.assertThrows(BackplaneException.class, () -> server.host().load("linked"));
                    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
                    assertTrue(e.getMessage().contains(model.resolve("weights").toAbsolutePath() + " is a symbolic link to " + outside)
                            && e.getMessage().contains("--allow-links-outside-repository"), e.getMessage());
                    assertEquals(0, backend.modelsLoaded.get());
                }
            } finally {
                server.close();
            }
            assertEquals(0, run.exit().get(60, TimeUnit.SECONDS), err.toString());
            run.thread().join(TimeUnit.SECONDS.toMillis(30));
        }
    }

    @Test
    void serve_port0_startsFrontendWithOptions_logsBoundPort_closesFrontendAndHostOnShutdown() throws Exception {
        Run run = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--http-port", "0", "--grpc-port", "-1",
                "--frontend-config", "http,greeting=hi", "--log-verbose");
        Server server = run.started().get(60, TimeUnit.SECONDS);

        FakeFrontends.Fake http = fake("http");
        assertEquals(Map.of("port", "0", "host", "0.0.0.0", "greeting", "hi", "drain_timeout_ms", "30000"), http.options());
        assertTrue(http.started);
        assertTrue(FakeFrontends.CREATED.stream().noneMatch(f -> f.name.equals("grpc")), "grpc has port -1 and must not be created");
        assertTrue(http.context.service() == server.host(), "frontends serve the host");
        int port = Integer.parseInt(http.endpoint().substring(http.endpoint().lastIndexOf(':') + 1));
        assertNotEquals(0, port);
        assertEquals(Map.of("http", "fake://0.0.0.0:" + port), server.endpoints());
        assertTrue(logs.list.stream().anyMatch(e -> e.getFormattedMessage().equals("frontend 'http' serving at fake://0.0.0.0:" + port)),
                "bound port logged: " + logs.list);
        assertEquals(Level.DEBUG, backplaneLogger.getLevel(), "--log-verbose raises io.backplane to DEBUG");
        assertTrue(server.host().isLive());

        server.close(); // what the SIGTERM hook does
        assertEquals(0, run.exit().get(60, TimeUnit.SECONDS), err.toString());
        run.thread().join(TimeUnit.SECONDS.toMillis(30));
        assertFalse(run.thread().isAlive());
        assertTrue(http.closed);
        assertFalse(server.host().isLive(), "host closed");
        assertTrue(server.isClosed());
        assertNotEquals(Level.DEBUG, backplaneLogger.getLevel(), "log level restored after serve");
    }

    @Test
    void serve_serverName_isWhatTheHostReports_defaultBackplane_blankRefused() throws Exception {
        Run named = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--allow-http=false", "--grpc-port", "-1",
                "--server-name", "triton");
        Server server = named.started().get(60, TimeUnit.SECONDS);
        assertEquals("triton", server.host().serverName());
        server.close();
        assertEquals(0, named.exit().get(60, TimeUnit.SECONDS));
        named.thread().join(TimeUnit.SECONDS.toMillis(30));

        Run plain = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--allow-http=false", "--grpc-port", "-1");
        Server s2 = plain.started().get(60, TimeUnit.SECONDS);
        assertEquals("backplane", s2.host().serverName());
        s2.close();
        assertEquals(0, plain.exit().get(60, TimeUnit.SECONDS));
        plain.thread().join(TimeUnit.SECONDS.toMillis(30));

        Run blank = serve("--model-repository", "repo", "--allow-http=false", "--grpc-port", "-1", "--server-name", " ");
        assertEquals(2, blank.exit().get(60, TimeUnit.SECONDS), err.toString());
        blank.thread().join(TimeUnit.SECONDS.toMillis(30));
        assertTrue(err.toString().contains("--server-name ' ' is blank"), err.toString());
    }

    /**
     * A plugin's own INFO lines: the configuration keeps every logger but io.backplane at WARN;
     * {@code --log-level <package>=INFO} lets them in while serve runs, and serve restores the level.
     */
    @Test
    void serve_logLevel_letsAPluginPackagesInfoLinesIn_restoredAfter_badSettingRefused() throws Exception {
        Logger plugin = (Logger) LoggerFactory.getLogger("com.example.mybackend");
        ListAppender<ILoggingEvent> pluginLines = new ListAppender<>();
        pluginLines.start();
        plugin.addAppender(pluginLines);
        try {
            org.slf4j.Logger backendLog = LoggerFactory.getLogger("com.example.mybackend.MyBackend");
            backendLog.info("before serve");
            assertTrue(pluginLines.list.isEmpty(), "a plugin's INFO is off by default: " + pluginLines.list);

            Run run = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--allow-http=false", "--grpc-port", "-1",
                    "--log-level", "com.example.mybackend=info");
            Server server = run.started().get(60, TimeUnit.SECONDS);
            backendLog.info("model loaded");
            assertEquals(List.of("model loaded"), pluginLines.list.stream().map(ILoggingEvent::getFormattedMessage).toList());
            server.close();
            assertEquals(0, run.exit().get(60, TimeUnit.SECONDS), err.toString());
            run.thread().join(TimeUnit.SECONDS.toMillis(30));

            backendLog.info("after serve");
            assertEquals(1, pluginLines.list.size(), "level restored after serve: " + pluginLines.list);
            assertEquals(null, plugin.getLevel());
        } finally {
            plugin.detachAppender(pluginLines);
        }

        for (String bad : new String[] {"com.example.mybackend", "com.example.mybackend=LOUD", "=INFO"}) {
            Run refused = serve("--model-repository", "repo", "--allow-http=false", "--grpc-port", "-1", "--log-level", bad);
            assertEquals(2, refused.exit().get(60, TimeUnit.SECONDS), err.toString());
            refused.thread().join(TimeUnit.SECONDS.toMillis(30));
            assertTrue(err.toString().contains("--log-level '" + bad + "': give <logger>=<level>, e.g. com.example.mybackend=INFO"), err.toString());
        }
    }

    @Test
    void serve_allFrontendsDisabled_stillServesHostUntilClosed() throws Exception {
        Run run = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--allow-http=false", "--grpc-port", "-1");
        Server server = run.started().get(60, TimeUnit.SECONDS);
        assertTrue(FakeFrontends.CREATED.isEmpty(), FakeFrontends.CREATED.toString());
        assertEquals(Map.of(), server.endpoints());
        server.close();
        assertEquals(0, run.exit().get(60, TimeUnit.SECONDS));
        run.thread().join(TimeUnit.SECONDS.toMillis(30));
    }

    @Test
    void serve_frontendFailsToStart_closesStartedOnesAndHost_exitCode1_namesFrontend() throws Exception {
        Run run = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--http-port", "0", "--grpc-port", "0",
                "--frontend-config", "grpc,fail=start");
        assertEquals(1, run.exit().get(60, TimeUnit.SECONDS));
        run.thread().join(TimeUnit.SECONDS.toMillis(30));
        assertFalse(run.started().isDone(), "never reported as started");
        assertTrue(err.toString().contains("frontend 'grpc' failed to start"), err.toString());
        assertTrue(err.toString().contains("simulated bind failure"), err.toString());
        for (FakeFrontends.Fake f : FakeFrontends.CREATED) {
            assertTrue(f.closed || !f.started, f.name + " left open");
        }
    }

    @Test
    void serve_closeFromTwoThreads_bothReturnAfterShutdown() throws Exception {
        Run run = serve("--model-repository", "repo", "--model-control-mode", "explicit", "--http-port", "0", "--grpc-port", "0");
        Server server = run.started().get(60, TimeUnit.SECONDS);
        AtomicInteger done = new AtomicInteger();
        Thread other = Thread.ofPlatform().start(() -> {
            server.close();
            done.incrementAndGet();
        });
        server.close();
        other.join(TimeUnit.SECONDS.toMillis(30));
        assertEquals(1, done.get());
        assertTrue(server.isClosed());
        assertEquals(0, run.exit().get(60, TimeUnit.SECONDS));
        run.thread().join(TimeUnit.SECONDS.toMillis(30));
        assertTrue(fake("http").closed && fake("grpc").closed);
    }

    /**
     * What the SIGTERM hook does, with requests in flight: the frontends and the host close
     * together under one deadline, the host drains — a request that finishes within --exit-timeout-secs succeeds, one whose model
     * never ends it is failed (UNAVAILABLE) at the deadline — and nothing is left running (L7, L10).
     */
    @Test
    void shutdown_withRequestsInFlight_drainsWhatFinishes_failsWhatDoesNotWithinExitTimeout() throws Exception {
        CountDownLatch slowRunning = new CountDownLatch(1);
        CountDownLatch stuckRunning = new CountDownLatch(1);
        CountDownLatch closing = new CountDownLatch(1);
        ScriptedBackend backend = new ScriptedBackend().on("slow", (batch, instance) -> {
            slowRunning.countDown();
            closing.await(30, TimeUnit.SECONDS); // still executing when shutdown starts
            for (var r : batch) {
                r.sender().sendFinal(ScriptedBackend.echo(r));
            }
        }).on("stuck", (batch, instance) -> stuckRunning.countDown()); // decoupled: holds its senders, never sends FINAL
        Run run = serve(b -> b.backend(backend).model(ScriptedBackend.model("slow", false)).model(ScriptedBackend.model("stuck", true)),
                // their executes hang on purpose: no built-in warm-up, which would run them before the start returns
                "--model-repository", "repo", "--http-port", "0", "--grpc-port", "-1", "--exit-timeout-secs", "1", "--builtin-warmup=false");
        Server server = run.started().get(60, TimeUnit.SECONDS);
        CompletableFuture<io.backplane.spi.InferenceResponse> slow = server.host().infer(ScriptedBackend.request("slow", 42));
        CompletableFuture<BackplaneException> stuck = new CompletableFuture<>();
        server.host().stream(ScriptedBackend.request("stuck", 7), new ResponseObserver() {
            @Override
            public void onResponse(io.backplane.spi.InferenceResponse response) {
                stuck.completeExceptionally(new AssertionError("stuck model answered"));
            }

            @Override
            public void onComplete() {
                stuck.completeExceptionally(new AssertionError("stuck model completed"));
            }

            @Override
            public void onError(BackplaneException error) {
                stuck.complete(error);
            }
        });
        assertTrue(slowRunning.await(30, TimeUnit.SECONDS) && stuckRunning.await(30, TimeUnit.SECONDS));

        Thread closer = Thread.ofPlatform().start(server::close);
        // the frontend closes beside the host, which stops admitting and drains
        Await.until(() -> fake("http").closed, Duration.ofSeconds(30), "the http frontend to close beside the host");
        closing.countDown();

        assertEquals(42L, ScriptedBackend.tagOf(slow.get(30, TimeUnit.SECONDS)), "in-flight request drained");
        assertEquals(ErrorCode.UNAVAILABLE, stuck.get(30, TimeUnit.SECONDS).code(), "request still open at the deadline is failed");
        closer.join(TimeUnit.SECONDS.toMillis(30));
        assertEquals(0, run.exit().get(60, TimeUnit.SECONDS), err.toString());
        run.thread().join(TimeUnit.SECONDS.toMillis(30));
        assertEquals(0, server.host().openRequests());
        assertEquals(backend.instancesCreated.get(), backend.instancesClosed.get(), "every instance finalized");
        assertEquals(backend.backendsCreated.get(), backend.backendsClosed.get(), "backend closed");
    }
}
