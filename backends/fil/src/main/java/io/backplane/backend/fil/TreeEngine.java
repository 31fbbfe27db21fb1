package io.backplane.backend.fil;

import java.lang.foreign.MemorySegment;

/**
 * One loaded tree model in its library. Thread-safe: {@link #predict} may run on several threads
 * at once (every instance of a model shares its engine; see each implementation for why the
 * library allows it). {@link #close} is called once, after the last {@code predict} returned
 * (the model's {@code NativeGuard} sees to that).
 */
interface TreeEngine extends AutoCloseable {
    /** Features per row the model was trained on. */
    int features();

    /** Values the library predicts per row: 1 for a regressor or a binary classifier, K for K classes. */
    int groups();

    /**
     * The library's own predictions for {@code rows} rows of {@link #features()} FP32 values,
     * row-major, little-endian, NaN meaning missing, in native memory aligned to 4 bytes (what
     * {@code RowBatch.stack} returns): {@code rows × groups()} values.
     */
    float[] predict(MemorySegment data, int rows) throws Exception;

    @Override
    void close();
}
