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

    /** Served by REST and gRPC. */
    public static final List<String> SERVED = List.of("model_repository", "model_configuration", "binary_tensor_data", "classification", "parameters",
            "statistics", "system_shared_memory");

    /** The logging extension: served when the host hands its frontends a {@code LogControl}. */
    public static final String LOGGING = "logging";

    /** The trace extension: served when the host hands its frontends a tracer that serves settings. */
    public static final String TRACE = "trace";

    /** What both frontends serve: {@link #SERVED}, plus {@link #LOGGING} and {@link #TRACE} when the host offers them. */
    public static List<String> served(boolean logging, boolean trace) {
        List<String> all = new java.util.ArrayList<>(SERVED);
        if (logging) {
            all.add(LOGGING);
        }
        if (trace) {
            all.add(TRACE);
        }
        return List.copyOf(all);
    }
}
