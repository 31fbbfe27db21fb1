package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.Await;
import io.backplane.testkit.ModelHarness;
import io.backplane.testkit.Reply;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One python model served by the real core ({@link ModelHarness}): the test models of
 * src/test/resources/models with their configs from {@link Configs}, short stub timeouts, and
 * the harness's exact batches. Also the checks of what a python test leaves behind. Close it.
 */
final class Harness implements AutoCloseable {
    static final Path MODELS = Path.of("src/test/resources/models").toAbsolutePath();

    /** Short timeouts so that fault tests run fast. */
    static final Map<String, String> FAST = Map.of(StubSettings.HEARTBEAT_INTERVAL, "50", StubSettings.HEARTBEAT_TIMEOUT, "400",
            StubSettings.STALL_KILL, "1500", StubSettings.RESTART_BACKOFF_MAX, "200", StubSettings.STARTUP_TIMEOUT, "30000",
            StubSettings.FINALIZE_TIMEOUT, "5000");

    final ModelHarness harness;
    final ModelConfig config;

    Harness(ModelConfig config, Map<String, String> options) {
        this(config, options, true);
    }

    /** With {@code exactBatches} false the model's own batcher runs (the dynamic batcher when the config has dynamic_batching). */
    Harness(ModelConfig config, Map<String, String> options, boolean exactBatches) {
        Map<String, String> opts = new LinkedHashMap<>(FAST);
        opts.putAll(options);
        this.config = config;
        ModelHarness.Builder b = ModelHarness.builder(new PythonBackendFactory()).model(config)
                .versionFilesFrom(MODELS.resolve(config.name()).resolve("1")).backendOptions(opts).answerTimeout(Duration.ofSeconds(60));
        if (exactBatches) {
            b.exactBatches();
        }
        this.harness = b.start();
    }

    Harness(ModelConfig config) {
        this(config, Map.of());
    }

    /** The instance the core created (one per model here). */
    PythonInstance instance() {
        return harness.instance(PythonInstance.class);
    }

    StubConnection stub() {
        StubConnection s = instance().currentStub();
        if (s == null) {
            throw new IllegalStateException("no stub");
        }
        return s;
    }

    Reply send(InferenceRequest r) {
        return harness.send(r);
    }

    /** Runs the requests as one batch through the core; the replies may still be open. */
    List<Reply> run(InferenceRequest... requests) throws InterruptedException {
        return harness.batch(requests);
    }

    /** Waits until the instance reports ready (a stub restarted), up to a deadline. */
    void awaitReady(long millis) {
        Await.until(() -> instance().isReady(), Duration.ofMillis(millis), "instance '" + harness.instanceContext().name() + "' to be ready");
    }

    static void signal(long pid, String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "kill -" + sig + " " + pid + " did not return");
    }

    @Override
    public void close() {
        harness.close();
    }

    // ---- what a python test leaves behind ----

    /** Region files this JVM created that still exist. */
    static List<Path> ownShmFiles() {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(SharedRegion.SHM_DIR, "backplane-" + ProcessHandle.current().pid() + "-*")) {
            ds.forEach(out::add);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return out;
    }

    /**
     * Python stubs (child processes, or forks of a template: they show its command line) still
     * alive; the templates themselves are not stubs.
     */
    static List<ProcessHandle> liveStubs() {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().commandLine().orElse("").contains("backplane_stub.py")).filter(p -> !isTemplate(p)).toList();
    }

    /** A stub template ({@link StubTemplate}): the JVM's child running {@code backplane_stub.py --template}. */
    static boolean isTemplate(ProcessHandle p) {
        return p.parent().map(q -> q.pid() == ProcessHandle.current().pid()).orElse(false)
                && p.info().commandLine().orElse("").contains("--template");
    }

    /** Fails unless python3 with numpy runs here. */
    static void requirePython() throws Exception {
        Process p;
        try {
            p = new ProcessBuilder("python3", "-c", "import numpy").redirectErrorStream(true).start();
        } catch (IOException e) {
            throw new AssertionError("these tests need python3 with numpy on PATH: " + e.getMessage(), e);
        }
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0,
                "these tests need python3 with numpy on PATH (pip install numpy): " + out);
    }

    /** Every stub of this JVM exits (waiting on its exit, up to 10 s each) and no region file of this JVM remains. */
    static void assertClean() throws InterruptedException {
        for (ProcessHandle stub : liveStubs()) {
            try {
                stub.onExit().get(10, TimeUnit.SECONDS);
            } catch (ExecutionException | TimeoutException e) {
                // reported below
            }
        }
        assertEquals(List.of(), liveStubs().stream().map(p -> p.pid() + " " + p.info().commandLine().orElse("")).toList(),
                "stub processes left");
        assertEquals(List.of(), ProcessHandle.current().children().filter(ProcessHandle::isAlive).filter(Harness::isTemplate)
                .map(p -> p.pid() + " " + p.info().commandLine().orElse("")).toList(), "stub templates left");
        assertEquals(List.of(), ownShmFiles(), "shared-memory files left");
    }
}
