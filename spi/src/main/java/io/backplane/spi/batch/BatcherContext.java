package io.backplane.spi.batch;

import io.backplane.spi.Experimental;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.ModelConfig;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/**
 * What a batcher needs from the host. Thread-safe.
 */
@Experimental
public interface BatcherContext {
    /** The model version's configuration (max batch size, dynamic batching block). */
    ModelConfig config();

    /** The model version. */
    long version();

    /**
     * How many instances pull batches from this batcher when the version loads. The count of a
     * model whose batcher is {@code dynamic} or {@code none} may change while it serves (a load
     * whose config override changes only instance counts, or an autoscaling policy); instance
     * indexes then go past it. Other batchers' models reload instead, so their count is fixed.
     */
    int instanceCount();

    /**
     * The model's folder ({@code <repository>/<model>}), where a batcher finds
     * files its config names (the sequence batcher's {@code initial_state} data files); null for
     * a model registered in code without one. The default returns null. Since SPI 2.
     */
    default @Nullable Path modelDirectory() {
        return null;
    }

    /** The host's monotonic clock; batchers must use it for every delay and timeout. */
    Ticker ticker();

    /**
     * Ends a queued request with an error (queue timeout, overflow, policy). The request must
     * have been removed from the batcher's queue; it must not be returned in a batch afterwards
     * (the core drops it if it is).
     */
    void reject(ScheduledRequest request, BackplaneException error);
}
