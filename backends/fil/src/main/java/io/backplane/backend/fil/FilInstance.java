package io.backplane.backend.fil;

import io.backplane.backend.fil.FilBackend.FilModel;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One instance of a fil model. {@code execute} stacks the rows of every valid request of the
 * batch into one prediction and splits the result per request; a request the engine fails with
 * others runs again alone, so one bad request fails only itself. Each request ends once, with
 * its rows' outputs or its own error. The engine is the model's, shared with its other
 * instances; every prediction holds the model's {@link EngineGuard}, so closing the model while
 * an abandoned execute is still in native code frees the booster only after it returned.
 */
final class FilInstance implements ModelInstance {
    private final FilModel model;

    FilInstance(FilModel model) {
        this.model = model;
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        List<ScheduledRequest> ready = new ArrayList<>(batch.size());
        List<Tensor> inputs = new ArrayList<>(batch.size());
        for (ScheduledRequest r : batch) {
            if (r.isCancelled()) {
                r.sender().sendError(new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " was cancelled before fil ran it"));
                continue;
            }
            try {
                inputs.add(checked(r));
                ready.add(r);
            } catch (BackplaneException e) {
                r.sender().sendError(e);
            }
        }
        if (ready.isEmpty()) {
            return;
        }
        EngineGuard.Entry entry;
        try {
            entry = model.guard.enter();
        } catch (BackplaneException closed) {
            failOpen(ready, closed);
            return;
        }
        try {
            run(ready, inputs);
        } finally {
            entry.close();
        }
    }

    private void run(List<ScheduledRequest> requests, List<Tensor> inputs) {
        try {
            answer(requests, inputs);
        } catch (Exception e) {
            if (requests.size() == 1) {
                failOpen(requests, e instanceof BackplaneException b ? b
                        : new BackplaneException(ErrorCode.INTERNAL, "fil model '" + model.name + "' could not predict: " + e, e));
                return;
            }
            for (int i = 0; i < requests.size(); i++) { // each alone: one bad request fails only itself
                run(List.of(requests.get(i)), List.of(inputs.get(i)));
            }
        }
    }

    private void answer(List<ScheduledRequest> requests, List<Tensor> inputs) throws Exception {
        int features = model.engine.features();
        int[] rows = new int[inputs.size()];
        int total = 0;
        for (int i = 0; i < rows.length; i++) {
            rows[i] = Math.toIntExact(inputs.get(i).elementCount() / features);
            total += rows[i];
        }
        float[] out;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment x;
            if (inputs.size() == 1) {
                x = inputs.getFirst().data();
            } else {
                x = arena.allocate((long) total * features * Float.BYTES, 64);
                long offset = 0;
                for (Tensor t : inputs) {
                    MemorySegment.copy(t.data(), 0, x, offset, t.byteSize());
                    offset += t.byteSize();
                }
            }
            float[] raw = model.engine.predict(x, total);
            out = model.fil.postprocess(raw, total, model.engine.groups(), model.width);
        }
        int width = model.width;
        int row = 0;
        for (int i = 0; i < requests.size(); i++) {
            float[] mine = Arrays.copyOfRange(out, row * width, (row + rows[i]) * width);
            row += rows[i];
            long[] inShape = inputs.get(i).shape();
            long[] shape = inShape.length == 1 ? new long[] {width} : new long[] {inShape[0], width};
            ScheduledRequest r = requests.get(i);
            if (!r.sender().isClosed()) {
                r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofFloats(FilBackend.OUTPUT, shape, mine))));
            }
        }
    }

    private Tensor checked(ScheduledRequest r) {
        Tensor t = r.request().input(FilBackend.INPUT);
        if (t == null) {
            throw BackplaneException.invalid("fil model '" + model.name + "' needs the input " + FilBackend.INPUT + " (FP32, [rows, features])");
        }
        if (t.dataType() != DataType.FP32) {
            throw BackplaneException.invalid("fil model '" + model.name + "': " + FilBackend.INPUT + " is " + t.dataType() + "; send FP32");
        }
        long[] shape = t.shape();
        int features = model.engine.features();
        boolean shapeOk = switch (shape.length) {
            case 1 -> !model.config.batches();
            case 2 -> true;
            default -> false;
        };
        if (!shapeOk || shape[shape.length - 1] != features) {
            throw BackplaneException.invalid("fil model '" + model.name + "': " + FilBackend.INPUT + " has shape " + Arrays.toString(shape)
                    + " but the model takes rows of " + features + " features; send [rows, " + features + "]");
        }
        if (t.byteSize() != t.elementCount() * Float.BYTES) {
            throw BackplaneException.invalid("fil model '" + model.name + "': " + FilBackend.INPUT + " carries " + t.byteSize() + " bytes for shape "
                    + Arrays.toString(shape) + "; send " + t.elementCount() * Float.BYTES);
        }
        return t;
    }

    private static void failOpen(List<ScheduledRequest> requests, BackplaneException e) {
        for (ScheduledRequest r : requests) {
            if (!r.sender().isClosed()) {
                r.sender().sendError(e);
            }
        }
    }

}
