package io.backplane.backend.cpu;

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
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/** Hand-written fakes of the SPI collaborators the core provides, until tests run through the real host. */
final class Fakes {
    private static final AtomicLong IDS = new AtomicLong();

    private Fakes() {
    }

    record Backend(String backendName, Map<String, String> options, Path workDirectory, int hostSpiVersion) implements BackendContext {
        Backend(Map<String, String> options) {
            this("cpu", options, Path.of(System.getProperty("java.io.tmpdir")), Spi.VERSION);
        }
    }

    record Model(String name, long version, ModelConfig config, Path modelDirectory, Path versionDirectory, BackendContext backend)
            implements ModelContext {
        Model(ModelConfig config, Path modelDirectory, BackendContext backend) {
            this(config.name(), 1, config, modelDirectory, modelDirectory.resolve("1"), backend);
        }
    }

    record Instance(String name, int index, InstanceKind kind, int deviceId, ModelContext model) implements InstanceContext {
        Instance(ModelContext model) {
            this(model.name() + "_0", 0, InstanceKind.CPU, 0, model);
        }

        @Override
        public void reportFailure(Throwable cause) {
            throw new AssertionError("instance reported failure", cause);
        }
    }

    /** A scheduled request that records what its sender got; enforces the plain-model sender rules. */
    static final class Request implements ScheduledRequest, ResponseSender {
        private final long id = IDS.incrementAndGet();
        private final InferenceRequest request;
        private final int batchSize;
        private final List<InferenceResponse> responses = new ArrayList<>();
        private volatile boolean closed;
        private volatile boolean cancelled;

        Request(InferenceRequest request, int batchSize) {
            this.request = request;
            this.batchSize = batchSize;
        }

        static Request of(InferenceRequest request) {
            int rows = request.inputs().isEmpty() || request.inputs().getFirst().rank() == 0 ? 1 : (int) request.inputs().getFirst().dim(0);
            return new Request(request, rows);
        }

        void cancel() {
            cancelled = true;
        }

        @Override
        public synchronized void send(@Nullable InferenceResponse response, int flags) {
            if (closed) {
                throw new IllegalStateException("request " + id + " is closed");
            }
            if (flags != FINAL || response == null) {
                throw new IllegalStateException("request " + id + ": a plain model sends one response with FINAL");
            }
            responses.add(response);
            closed = true;
        }

        @Override
        public boolean isClosed() {
            return closed;
        }

        /** The one response; fails when there is none or more. */
        synchronized InferenceResponse response() {
            if (responses.size() != 1) {
                throw new AssertionError("request " + id + " got " + responses.size() + " responses");
            }
            return responses.getFirst();
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
            return this;
        }

        @Override
        public boolean isCancelled() {
            return cancelled;
        }


        @Override
        public int batchSize() {
            return batchSize;
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
}
