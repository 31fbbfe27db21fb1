package io.backplane.backend.fil;

import io.backplane.backend.fil.FilBackend.FilModel;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.engine.BatchLayout;
import io.backplane.spi.engine.NativeGuard;
import io.backplane.spi.engine.RowBatch;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * One instance of a fil model. Batching is the SPI's ({@link BatchLayout}, {@link RowBatch}): the
 * requests of a batch are checked and grouped by shape, and each group's rows go to the library in
 * one prediction (a lone request's own memory, untouched; several requests' rows copied once into
 * one buffer), whose result is cut per request. A group the library fails runs again request by
 * request, so a bad request fails only itself.
 *
 * <p>The engine belongs to the model and is shared by its instances; every prediction holds the
 * model's {@link NativeGuard}, so a model closed while an abandoned {@code execute} is still in
 * native code frees the booster only when that prediction has returned.
 */
final class FilInstance implements ModelInstance {
    private final FilModel model;
    private final BatchLayout layout;

    FilInstance(FilModel model) {
        this.model = model;
        this.layout = BatchLayout.of(model.config);
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        try (NativeGuard.Entry _ = model.guard.enter()) {
            layout.execute(batch, this::predict);
        }
    }

    /** One library call for the group: output__0 with the batch dimension first (the layout splits it). */
    private Map<String, Tensor> predict(RowBatch group) throws Exception {
        long[] shape = group.shape(FilBackend.INPUT);
        int features = model.engine.features();
        if (shape.length == 0 || shape.length > 2 || shape[shape.length - 1] != features) {
            throw BackplaneException.invalid("fil model '" + model.name + "': " + FilBackend.INPUT + " has shape " + Arrays.toString(shape)
                    + " but the model takes rows of " + features + " features; send [rows, " + features + "]");
        }
        int rows = shape.length == 2 ? Math.toIntExact(shape[0]) : 1;
        float[] out;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment x = group.stack(FilBackend.INPUT, arena);
            float[] raw = model.engine.predict(x, rows);
            out = model.fil.postprocess(raw, rows, model.engine.groups(), model.width);
        }
        long[] outShape = shape.length == 2 ? new long[] {rows, model.width} : new long[] {model.width};
        return Map.of(FilBackend.OUTPUT, Tensor.ofFloats(FilBackend.OUTPUT, outShape, out));
    }
}
