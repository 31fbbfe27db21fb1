package io.backplane.backend.python;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** One backend with one loaded model and its instance, built on the fakes. Close it. */
final class Harness implements AutoCloseable {
    /** Short timeouts so that fault tests run fast. */
    static final Map<String, String> FAST = Map.of(StubSettings.HEARTBEAT_INTERVAL, "50", StubSettings.HEARTBEAT_TIMEOUT, "400",
            StubSettings.STALL_KILL, "1500", StubSettings.RESTART_BACKOFF_MAX, "200", StubSettings.STARTUP_TIMEOUT, "30000",
            StubSettings.FINALIZE_TIMEOUT, "5000");

    final Path work;
    final PythonBackend backend;
    final ModelConfig config;
    final PythonModel model;
    final Fakes.Instance instanceContext;
    PythonInstance instance;

    Harness(ModelConfig config, Map<String, String> options) throws Exception {
        this.work = Files.createTempDirectory("bp-python-test");
        Map<String, String> opts = new LinkedHashMap<>(FAST);
        opts.putAll(options);
        Fakes.Backend bc = new Fakes.Backend("python", opts, work);
        this.backend = PythonBackend.create(bc);
        this.config = config;
        PythonModel m = null;
        Fakes.Instance ic = null;
        try {
            m = (PythonModel) backend.loadModel(Fakes.Model.of(config, bc));
            ic = new Fakes.Instance(m.context());
            instance = (PythonInstance) m.createInstance(ic);
        } catch (Exception | Error e) {
            backend.close();
            deleteWork();
            throw e;
        }
        this.model = m;
        this.instanceContext = ic;
    }

    Harness(ModelConfig config) throws Exception {
        this(config, Map.of());
    }

    Fakes.Request request(InferenceRequest r) {
        return new Fakes.Request(r, config.decoupled());
    }

    /** Runs one batch through execute and returns the fakes. */
    List<Fakes.Request> run(InferenceRequest... requests) throws Exception {
        List<Fakes.Request> rs = new ArrayList<>();
        for (InferenceRequest r : requests) {
            rs.add(request(r));
        }
        instance.execute(new ArrayList<ScheduledRequest>(rs));
        return rs;
    }

    StubConnection stub() {
        StubConnection s = instance.currentStub();
        if (s == null) {
            throw new IllegalStateException("no stub");
        }
        return s;
    }

    void awaitReady(long millis) throws InterruptedException {
        long deadline = System.nanoTime() + millis * 1_000_000;
        while (!instance.isReady() && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        if (!instance.isReady()) {
            throw new AssertionError("instance not ready after " + millis + " ms");
        }
    }

    static void signal(long pid, String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start();
        p.waitFor();
    }

    @Override
    public void close() {
        try {
            if (instance != null) {
                instance.close();
            }
            model.close();
        } finally {
            backend.close();
            deleteWork();
        }
    }

    private void deleteWork() {
        try (var s = Files.walk(work)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
