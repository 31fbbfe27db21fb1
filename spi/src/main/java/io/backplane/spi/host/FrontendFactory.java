package io.backplane.spi.host;

/**
 * Creates a {@link Frontend}: a protocol server (REST, gRPC) or another host plugin (metrics
 * endpoint). Discovered through {@link java.util.ServiceLoader}
 * ({@code META-INF/services/io.backplane.spi.host.FrontendFactory}) on the class path and in
 * the plugin directories, like backends.
 */
public interface FrontendFactory {
    /** Unique name, e.g. {@code "http"}, {@code "grpc"}, {@code "metrics"}. */
    String name();

    /** See {@link io.backplane.spi.BackendFactory#spiVersion()}: 0 (the default) lets the host read the jar's manifest. */
    default int spiVersion() {
        return 0;
    }

    /** Creates the frontend; it starts serving in {@link Frontend#start()}. */
    Frontend create(FrontendContext context) throws Exception;
}
