package io.backplane.spi.batch;

import io.backplane.spi.Experimental;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.ModelConfig;

/**
 * What a batcher needs from the host. Thread-safe.
 */
@Experimental
public interface BatcherContext {
    /** The model version's configuration (max batch size, dynamic batching block). */
    ModelConfig config();

    /** The model version. */
    long version();

    /** How many instances pull batches from this batcher. */
    int instanceCount();

    /** The host's monotonic clock; batchers must use it for every delay and timeout. */
    Ticker ticker();

    /**
     * Ends a queued request with an error (queue timeout, overflow, policy). The request must
     * have been removed from the batcher's queue; it must not be returned in a batch afterwards
     * (the core drops it if it is).
     */
    void reject(ScheduledRequest request, BackplaneException error);
}
