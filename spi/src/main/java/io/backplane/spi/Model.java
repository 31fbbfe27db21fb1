package io.backplane.spi;

/**
 * One loaded model version. Created by {@link Backend#loadModel}; owned by the core.
 *
 * <p><b>Threads.</b> {@link #createInstance} may be called concurrently, and again later to
 * replace a failed instance. {@link #close} is called once, after every instance of this model
 * has been closed.
 */
public interface Model extends AutoCloseable {
    /**
     * Creates one execution instance.
     *
     * @throws Exception a failure at load fails the load; at restart, the core retries with a
     *     capped backoff and the model reports not ready while no instance can serve
     */
    ModelInstance createInstance(InstanceContext context) throws Exception;

    /**
     * Releases the model version. Called once, after all its instances closed. The default does
     * nothing, for a model that holds nothing beyond its instances.
     */
    @Override
    default void close() {
    }
}
