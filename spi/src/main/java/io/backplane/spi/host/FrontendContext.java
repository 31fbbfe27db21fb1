package io.backplane.spi.host;

import java.util.Map;

/** What a frontend gets from the host. */
public interface FrontendContext {
    /** The host's serving API. */
    InferenceService service();

    /**
     * This frontend's options, e.g. {@code port=8000}, {@code host=0.0.0.0}; a port of 0 means
     * "pick a free one". Never null.
     */
    Map<String, String> options();

    /**
     * The host's run-time logging control, or null when the host offers none (then the frontends
     * do not serve the logging extension). The default is null.
     */
    default @org.jspecify.annotations.Nullable LogControl logControl() {
        return null;
    }

    /**
     * The host's request tracer (Triton's trace extension); {@link RequestTracer#NONE} (the
     * default) traces nothing and the frontends then do not serve the extension.
     */
    default RequestTracer tracer() {
        return RequestTracer.NONE;
    }

    /**
     * A new CUDA shared-memory registry for the frontends' shared system registry to hold (it
     * closes it). The host answers with its GPU backend's provider, wherever that backend was
     * loaded from; the default looks on the class path only ({@link DeviceSharedMemory#discover()}),
     * and is not {@link DeviceSharedMemory#available() available} without a usable GPU.
     */
    default DeviceSharedMemory deviceSharedMemory() {
        return DeviceSharedMemory.discover();
    }

    /**
     * The host's custom-metrics registry, for this frontend's own series (a frontend's count of
     * malformed messages, say): families created through it are exported by the host's metrics
     * plugin ({@link InferenceService#customMetrics()}) beside the models' families. Families and
     * metrics are reference-counted host-wide, so two frontends asking for the same family and
     * labels share one series; close what you create when the frontend closes (a series goes
     * when its last reference does). May be called from any thread, any number of times;
     * thread-safe; never null.
     *
     * @throws UnsupportedOperationException when the host offers no metrics to frontends (the
     *     default): the frontend then serves without its own series
     * @since SPI 5
     */
    default io.backplane.spi.metrics.MetricRegistry metrics() {
        throw new UnsupportedOperationException("this host offers no metrics to frontends");
    }

    /**
     * The host-wide object of {@code type}, so that the host's frontends share one (Triton's
     * system shared-memory regions: one registry for REST and gRPC). The first frontend to ask
     * creates it with {@code create}; the host closes it after every frontend has closed. The
     * default shares nothing: it creates one for the caller, which then owns and closes it
     * ({@link Shared#callerCloses()}).
     */
    default <T extends AutoCloseable> Shared<T> shared(Class<T> type, java.util.function.Supplier<T> create) {
        return new Shared<>(create.get(), true);
    }

    /**
     * An object from {@link #shared}.
     *
     * @param value the object
     * @param callerCloses whether the frontend that asked must close it (it was not shared)
     */
    record Shared<T extends AutoCloseable>(T value, boolean callerCloses) {
        public Shared {
            java.util.Objects.requireNonNull(value, "value is null");
        }
    }
}
