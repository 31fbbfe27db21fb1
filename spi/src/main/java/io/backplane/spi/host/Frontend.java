package io.backplane.spi.host;

/**
 * A running protocol server or host plugin. {@link #start()} is called once; {@link #close()}
 * once, before the host unloads its models, and must stop accepting work and release every
 * thread and port.
 */
public interface Frontend extends AutoCloseable {
    /** Starts serving; returns once the port is bound. */
    void start() throws Exception;

    /** Where it serves, e.g. {@code "http://0.0.0.0:8000"} (the bound port when 0 was asked). */
    String endpoint();

    /** Stops serving and releases everything. Idempotent. */
    @Override
    void close();
}
