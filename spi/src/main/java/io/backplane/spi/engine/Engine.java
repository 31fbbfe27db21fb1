package io.backplane.spi.engine;

import io.backplane.spi.Tensor;
import java.util.Map;

/**
 * One engine call for a {@link RowBatch}: what a backend passes to {@link BatchLayout#execute}.
 */
@FunctionalInterface
public interface Engine {
    /**
     * Runs the group as one engine call.
     *
     * @return every output in {@link RowBatch#outputs()} by name, each with the batch dimension first
     *     ({@link RowBatch#rows()} rows) when the model batches; tensors whose memory outlives the
     *     call (the responses keep slices of it)
     * @throws Exception when the engine fails; {@link BatchLayout#execute} then runs each request of a
     *     group of several again alone, so that only the request at fault fails
     */
    Map<String, Tensor> run(RowBatch batch) throws Exception;
}
