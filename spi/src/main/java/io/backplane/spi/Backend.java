package io.backplane.spi;

import io.backplane.spi.config.ModelConfig;

/**
 * Backend-wide state: one per backend per host, created by {@link BackendFactory#create}.
 *
 * <p><b>Threads.</b> {@link #autoCompleteConfig} and {@link #loadModel} may be called
 * concurrently for different models, from host threads. {@link #close} is called once, after
 * every model of this backend has been closed; no call comes after it.
 */
public interface Backend extends AutoCloseable {
    /**
     * Completes a model's configuration before it loads (Triton's auto-complete): e.g. fill
     * inputs and outputs from the model file. Returns the config to use; the default returns
     * {@code context.config()} unchanged.
     *
     * @throws Exception a failure fails this model's load with the cause in its message
     */
    default ModelConfig autoCompleteConfig(ModelContext context) throws Exception {
        return context.config();
    }

    /**
     * Loads one model version. The returned model belongs to the core, which closes it exactly
     * once.
     *
     * @throws Exception a failure fails this load (the host keeps serving everything else, and
     *     a previous version of the same model keeps serving)
     */
    Model loadModel(ModelContext context) throws Exception;

    /**
     * How many GPUs this backend can place instances on now (e.g. the devices its driver sees).
     * The core asks when a model has {@code KIND_AUTO} instances and the backend's
     * {@link BackendCapabilities#preferredInstanceKind()} is GPU: above 0, they go to GPU 0,
     * else to the CPU. Called on host threads, possibly concurrently; must be cheap and must not
     * throw. The default is 0 (no GPU).
     */
    @Experimental
    default int deviceCount() {
        return 0;
    }

    /**
     * Releases backend-wide resources. Called once, last, after every model of this backend
     * closed. The default does nothing: a backend without threads, processes or native handles of
     * its own needs no close.
     */
    @Override
    default void close() {
    }
}
