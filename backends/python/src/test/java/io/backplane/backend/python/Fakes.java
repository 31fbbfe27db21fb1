package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.backplane.spi.BackendContext;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/** Hand-written fakes of the core's side of the SPI, with the core's sender rules (L1, L2). */
final class Fakes {
    private Fakes() {
    }

    static final Path MODELS = Path.of("src/test/resources/models").toAbsolutePath();
    private static final AtomicLong IDS = new AtomicLong();

    /** A sender that enforces OPEN → CLOSED and records everything. */
    static final class Sender implements ResponseSender {
        final long requestId;
        final boolean decoupled;
        final List<InferenceResponse> responses = new CopyOnWriteArrayList<>();
        final AtomicInteger finals = new AtomicInteger();
        final CountDownLatch done = new CountDownLatch(1);
        private volatile boolean closed;

        Sender(long requestId, boolean decoupled) {
            this.requestId = requestId;
            this.decoupled = decoupled;
        }

        @Override
        public synchronized void send(@Nullable InferenceResponse response, int flags) {
            if (closed) {
                throw new IllegalStateException("request " + requestId + " is closed");
            }
            boolean fin = (flags & FINAL) != 0;
            if (!decoupled && (!fin || response == null)) {
                throw new IllegalStateException("request " + requestId + ": a plain model sends exactly one response with FINAL");
            }
            if (response != null) {
                responses.add(response);
            }
            if (fin) {
                closed = true;
                finals.incrementAndGet();
                done.countDown();
            }
        }

        @Override
        public boolean isClosed() {
            return closed;
        }

        InferenceResponse await() throws InterruptedException {
            if (!done.await(30, TimeUnit.SECONDS)) {
                fail("request " + requestId + " did not end within 30 s");
            }
            assertEquals(1, finals.get());
            return responses.isEmpty() ? InferenceResponse.of(List.of()) : responses.get(responses.size() - 1);
        }
    }

    static final class Request implements ScheduledRequest {
        final long id = IDS.incrementAndGet();
        final InferenceRequest request;
        final Sender sender;
        volatile boolean cancelled;

        Request(InferenceRequest request, boolean decoupled) {
            this.request = request;
            this.sender = new Sender(id, decoupled);
        }

        @Override
        public long id() {
            return id;
        }

        @Override
        public InferenceRequest request() {
            return request;
        }

        @Override
        public ResponseSender sender() {
            return sender;
        }

        @Override
        public boolean isCancelled() {
            return cancelled;
        }


        @Override
        public int batchSize() {
            return 1;
        }

        @Override
        public int priorityLevel() {
            return 1;
        }

        @Override
        public long arrivalNanos() {
            return 0;
        }
    }

    record Backend(String backendName, Map<String, String> options, Path workDirectory) implements BackendContext {
        @Override
        public int hostSpiVersion() {
            return Spi.VERSION;
        }
    }

    record Model(String name, long version, ModelConfig config, Path modelDirectory, Path versionDirectory, BackendContext backend)
            implements ModelContext {
        static Model of(ModelConfig config, BackendContext backend) {
            Path dir = MODELS.resolve(config.name());
            return new Model(config.name(), 1, config, dir, dir.resolve("1"), backend);
        }
    }

    static final class Instance implements InstanceContext {
        final ModelContext model;
        final List<Throwable> failures = new CopyOnWriteArrayList<>();

        Instance(ModelContext model) {
            this.model = model;
        }

        @Override
        public String name() {
            return model.name() + "_0";
        }

        @Override
        public int index() {
            return 0;
        }

        @Override
        public InstanceKind kind() {
            return InstanceKind.CPU;
        }

        @Override
        public int deviceId() {
            return 0;
        }

        @Override
        public ModelContext model() {
            return model;
        }

        @Override
        public void reportFailure(Throwable cause) {
            failures.add(cause);
        }
    }

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

    /** Python stubs (child processes) still alive. */
    static List<ProcessHandle> liveStubs() {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().commandLine().orElse("").contains("backplane_stub.py")).toList();
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

    static void assertClean() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while ((!liveStubs().isEmpty() || !ownShmFiles().isEmpty()) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(List.of(), liveStubs().stream().map(p -> p.pid() + " " + p.info().commandLine().orElse("")).toList(),
                "stub processes left");
        assertEquals(List.of(), ownShmFiles(), "shared-memory files left");
    }
}
