package io.backplane.spi.host;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.metrics.MetricFamilySnapshot;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * What a running host offers its callers and frontends. Implemented by the core's embedded host.
 * Thread-safe; every method may be called from any thread.
 *
 * <p>Errors are {@link io.backplane.spi.BackplaneException}s whose {@link io.backplane.spi.ErrorCode}
 * maps to one HTTP and one gRPC status, so every frontend reports the same failure the same way.
 */
public interface InferenceService {
    /**
     * Runs a request on a plain (non-decoupled) model. The future completes exactly once: with
     * the response, or exceptionally with a {@code BackplaneException}. Cancelling the future
     * cancels the request.
     */
    CompletableFuture<InferenceResponse> infer(InferenceRequest request);

    /**
     * Runs a request on any model, delivering each response to {@code observer} and then exactly
     * one terminal call. A request that cannot be accepted gets {@code onError} before this
     * method returns.
     */
    RequestHandle stream(InferenceRequest request, ResponseObserver observer);

    /** Loads or reloads a model; returns when it is ready, or throws why it could not load. */
    void load(String model);

    /**
     * Loads or reloads a model with a config and/or files in place of the repository's (Triton's
     * repository extension, see {@link LoadOverride}); returns when it is ready. A later load
     * without an override reads the repository again.
     *
     * <p>The default serves {@link LoadOverride#isEmpty() an empty override} as {@link #load(String)}
     * and refuses any other with UNSUPPORTED.
     *
     * @throws io.backplane.spi.BackplaneException INVALID_ARGUMENT naming a bad config field, file
     *     name or size; what {@link #load(String)} throws
     */
    default void load(String model, LoadOverride override) {
        if (!override.isEmpty()) {
            throw new io.backplane.spi.BackplaneException(io.backplane.spi.ErrorCode.UNSUPPORTED,
                    "this host does not take a config or files with a load; load model '" + model + "' from the repository as it is");
        }
        load(model);
    }

    /** Unloads a model within the unload deadline; every open request of it ends. */
    void unload(String model);

    /**
     * Unloads a model as {@link #unload(String)}; with {@code dependents} also the models it
     * depends on (an ensemble's composing models) that no other loaded model uses and that were
     * not loaded on their own (Triton's {@code unload_dependents}).
     *
     * <p>The default serves {@code dependents == false} as {@link #unload(String)} and refuses
     * {@code true} with UNSUPPORTED.
     */
    default void unload(String model, boolean dependents) {
        if (dependents) {
            throw new io.backplane.spi.BackplaneException(io.backplane.spi.ErrorCode.UNSUPPORTED,
                    "this host does not unload a model's dependents; unload model '" + model + "' and its composing models one by one");
        }
        unload(model);
    }

    /** The host is running. */
    boolean isLive();

    /**
     * The host is running and (under strict readiness) every loaded model has a ready version. May
     * wait for the instances' own readiness checks ({@link io.backplane.spi.ModelInstance#checkReady()},
     * bounded by each backend); a caller that must not block uses {@link #checkReady()}.
     */
    boolean isReady();

    /**
     * The model (version, or {@link InferenceRequest#LATEST}) is loaded and an instance can serve,
     * by its own readiness check where it has one. May wait for that check (bounded by the
     * backend); a caller that must not block uses {@link #checkModelReady(String, long)}.
     */
    boolean isModelReady(String model, long version);

    /**
     * {@link #isReady()} as a future that never fails, for callers that must not block (event
     * loops). The default answers on the calling thread.
     *
     * @since SPI 4
     */
    default CompletableFuture<Boolean> checkReady() {
        return CompletableFuture.completedFuture(isReady());
    }

    /**
     * {@link #isModelReady(String, long)} as a future that never fails, for callers that must not
     * block (event loops). The default answers on the calling thread.
     *
     * @since SPI 4
     */
    default CompletableFuture<Boolean> checkModelReady(String model, long version) {
        return CompletableFuture.completedFuture(isModelReady(model, version));
    }

    /**
     * The folder of a loaded model version's model in its repository ({@code <repository>/<model>},
     * where {@code config.pbtxt} is), for frontends that read a model's own files beside it (the
     * OpenAI frontend reads its tokenizer and chat template there). Empty for a model defined in
     * code, and by default.
     *
     * @throws io.backplane.spi.BackplaneException NOT_FOUND when the model or version is not loaded
     * @since SPI 5
     */
    default java.util.Optional<java.nio.file.Path> modelDirectory(String model, long version) {
        return java.util.Optional.empty();
    }

    /** Metadata of a loaded model version. */
    ModelMetadata metadata(String model, long version);

    /** The config a loaded model version runs with (after auto-complete). */
    ModelConfig modelConfig(String model, long version);

    /** Every model in the repository and each loaded version's state. */
    List<ModelStatus> repositoryIndex();

    /** Whether {@link #load} and {@link #unload} are allowed (explicit model control). */
    boolean modelControlEnabled();

    /**
     * Registers a listener for request and instance events (metrics). The core's host then tells
     * it {@link HostListener#versionLoaded(String, long, long)} for every version already serving,
     * so a listener added late still learns their load times.
     */
    void addListener(HostListener listener);

    /**
     * Statistics of the ready versions of a model, or of every model when {@code model} is empty
     * (Triton's statistics extension). {@code version} {@link io.backplane.spi.InferenceRequest#LATEST}
     * means every ready version.
     *
     * @throws io.backplane.spi.BackplaneException NOT_FOUND when a named model or version is not ready
     */
    default List<ModelStatistics> statistics(String model, long version) {
        return List.of();
    }

    /**
     * Reserves {@code bytes} of the host-wide memory budget for a request whose body is about to be
     * read (O1). Frontends call it before they read a body into memory and close the reservation
     * once the response is sent; a refused request is answered at once, its body never read.
     *
     * @param bytes the body's size as announced (0 when unknown: grow the reservation as it arrives)
     * @param what the request, for the error message (e.g. {@code "POST /v2/models/m/infer"})
     * @return the reservation; never null
     * @throws io.backplane.spi.BackplaneException RESOURCE_EXHAUSTED when the budget cannot hold
     *     {@code bytes} now; the message names the request, the budget and what is held
     */
    default MemoryReservation reserveMemory(long bytes, String what) {
        return MemoryReservation.unlimited();
    }

    /** The memory budget's limit, what is held and how many requests it refused (for metrics). */
    default MemoryReservation.Usage memoryUsage() {
        return MemoryReservation.Usage.NONE;
    }

    /** Backplane's version string. */
    String version();

    /**
     * The name the server reports in its metadata (REST {@code GET /v2}, gRPC
     * {@code ServerMetadata}); configurable so that clients and dashboards that look for Triton
     * find the name they expect. The default is {@code backplane}.
     */
    default String serverName() {
        return "backplane";
    }

    /**
     * The custom metric families backends created through
     * {@link io.backplane.spi.ModelContext#metrics()}, for exporters such as the metrics plugin.
     * Never null; empty when there are none or the host offers none.
     */
    default List<MetricFamilySnapshot> customMetrics() {
        return List.of();
    }
}
