package io.backplane.backend.cuda;

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
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;

/**
 * Minimal stand-ins for the core's side of the SPI, so that {@link GpuSelfTest} (on a GPU
 * machine that has nothing but the driver and a bundled runtime) and this module's tests can
 * drive the backend without the core. They keep only what the backend relies on: one FINAL per
 * sender, failures recorded.
 */
final class Standalone {
    private static final AtomicLong IDS = new AtomicLong();

    private Standalone() {
    }

    record Backend(String backendName, Map<String, String> options, Path workDirectory) implements BackendContext {
        @Override
        public int hostSpiVersion() {
            return Spi.VERSION;
        }
    }

    record Model(String name, long version, ModelConfig config, Path modelDirectory, BackendContext backend) implements ModelContext {
        static Model of(Path modelDirectory, long version, ModelConfig config) {
            return new Model(config.name(), version, config, modelDirectory,
                    new Backend(CudaBackendFactory.NAME, Map.of(), modelDirectory));
        }

        @Override
        public Path versionDirectory() {
            return modelDirectory.resolve(Long.toString(version));
        }
    }

    /** An instance context that records {@link #reportFailure} calls. */
    static final class Instance implements InstanceContext {
        private final String name;
        private final int index;
        private final InstanceKind kind;
        private final int deviceId;
        private final ModelContext model;
        final List<Throwable> failures = new CopyOnWriteArrayList<>();

        Instance(ModelContext model, int index, InstanceKind kind, int deviceId) {
            this.model = model;
            this.index = index;
            this.kind = kind;
            this.deviceId = deviceId;
            this.name = model.name() + "_" + index;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public int index() {
            return index;
        }

        @Override
        public InstanceKind kind() {
            return kind;
        }

        @Override
        public int deviceId() {
            return deviceId;
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

    /** A plain request and its sender: keeps the one FINAL response. */
    static final class Request implements ScheduledRequest, ResponseSender {
        private final long id = IDS.incrementAndGet();
        private final InferenceRequest request;
        private final AtomicReference<@Nullable InferenceResponse> response = new AtomicReference<>();
        private final AtomicLong sends = new AtomicLong();
        private volatile boolean cancelled;

        Request(InferenceRequest request) {
            this.request = request;
        }

        static List<ScheduledRequest> batch(List<Request> requests) {
            return new ArrayList<>(requests);
        }

        void cancel() {
            cancelled = true;
        }

        /** The FINAL response, or null when none came. */
        @Nullable InferenceResponse response() {
            return response.get();
        }

        long sends() {
            return sends.get();
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

        @Override
        public void send(@Nullable InferenceResponse r, int flags) {
            if ((flags & FINAL) == 0 || r == null) {
                throw new IllegalStateException("request " + id + ": a plain model sends exactly one response with FINAL");
            }
            if (!response.compareAndSet(null, r)) {
                throw new IllegalStateException("request " + id + " is closed");
            }
            sends.incrementAndGet();
        }

        @Override
        public boolean isClosed() {
            return response.get() != null;
        }
    }
}
