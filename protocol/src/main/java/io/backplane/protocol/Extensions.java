package io.backplane.protocol;

import java.util.List;

/**
 * The protocol extensions both frontends serve, in one list: REST {@code GET /v2} and gRPC
 * {@code ServerMetadata} report exactly these. Add an extension here only once both frontends
 * serve it.
 */
public final class Extensions {
    private Extensions() {
    }

    /** Served by REST and gRPC. */
    public static final List<String> SERVED = List.of("model_repository", "model_configuration", "binary_tensor_data", "classification", "parameters",
            "statistics", "system_shared_memory");
}
