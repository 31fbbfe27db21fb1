package io.backplane.protocol;

import java.util.List;

/**
 * The protocol extensions both frontends serve, in one list: REST {@code GET /v2} and gRPC
 * {@code ServerMetadata} report exactly these. Add an extension here only once both frontends
 * serve it. Extensions that depend on what the host offers are added by {@link #served(boolean, boolean)}.
 */
public final class Extensions {
    private Extensions() {
    }

    /**
     * The repository extension's optional {@code unload_dependents} component, listed as Triton
     * lists it beside {@code model_repository} when it serves it.
     */
    public static final String MODEL_REPOSITORY_UNLOAD_DEPENDENTS = "model_repository(unload_dependents)";

    /** Served by REST and gRPC. */
    public static final List<String> SERVED = List.of("model_repository", MODEL_REPOSITORY_UNLOAD_DEPENDENTS, "model_configuration",
            "binary_tensor_data", "classification", "parameters", "statistics", "system_shared_memory");

    /** The logging extension: served when the host hands its frontends a {@code LogControl}. */
    public static final String LOGGING = "logging";

    /** The trace extension: served when the host hands its frontends a tracer that serves settings. */
    public static final String TRACE = "trace";

    /** The CUDA shared-memory extension: served when the host has a usable GPU (a GPU backend's {@code DeviceSharedMemory}). */
    public static final String CUDA_SHARED_MEMORY = "cuda_shared_memory";

    /** What both frontends serve: {@link #SERVED}, plus {@link #LOGGING} and {@link #TRACE} when the host offers them. */
    public static List<String> served(boolean logging, boolean trace) {
        return served(logging, trace, false);
    }

    /** As {@link #served(boolean, boolean)}, plus {@link #CUDA_SHARED_MEMORY} when a GPU serves it. */
    public static List<String> served(boolean logging, boolean trace, boolean cudaSharedMemory) {
        List<String> all = new java.util.ArrayList<>(SERVED);
        if (cudaSharedMemory) {
            all.add(all.indexOf("system_shared_memory") + 1, CUDA_SHARED_MEMORY);
        }
        if (logging) {
            all.add(LOGGING);
        }
        if (trace) {
            all.add(TRACE);
        }
        return List.copyOf(all);
    }
}
