package ${package};

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.engine.BatchLayout;
import io.backplane.spi.engine.NativeGuard;
import io.backplane.spi.engine.RowBatch;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One instance, written the way an instance over a native engine is (the SPI's engine helpers):
 * <ul>
 *   <li>{@link BatchLayout} checks every request against the config, ends cancelled ones, and
 *       groups requests of equal shapes; {@link BatchLayout#execute} runs each group as one
 *       engine call and, when that call fails, runs each request of the group alone, so a bad
 *       request fails only itself;</li>
 *   <li>{@link RowBatch#stack} hands the engine every request's rows as one contiguous segment
 *       (little-endian, row-major: the layout of every Backplane tensor), and the outputs are
 *       split back per request by the helper;</li>
 *   <li>{@link NativeGuard} frees the engine's state once, never under an {@code execute} still
 *       inside it. Here the "engine state" is a native segment holding the factor; replace it with
 *       your engine's session.</li>
 * </ul>
 * The host never calls {@link #execute} concurrently on one instance.
 */
final class ${backendClass}Instance implements ModelInstance {
    private static final ValueLayout.OfFloat LE_FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final BatchLayout layout;
    private final List<String> inputs;
    private final List<String> outputs;
    private final Arena engineArena = Arena.ofShared();
    private final MemorySegment engineState; // stands in for a native engine session
    private final NativeGuard guard;

    ${backendClass}Instance(String where, io.backplane.spi.config.ModelConfig config, float factor) {
        this.layout = BatchLayout.of(config);
        this.inputs = config.inputs().stream().map(TensorConfig::name).toList();
        this.outputs = config.outputs().stream().map(TensorConfig::name).toList();
        if (inputs.size() != outputs.size()) {
            throw BackplaneException.invalid(where + ": " + inputs.size() + " input(s) " + inputs + " and " + outputs.size() + " output(s) "
                    + outputs + "; this backend maps the n-th input to the n-th output, declare as many of each");
        }
        this.engineState = engineArena.allocate(LE_FLOAT);
        engineState.set(LE_FLOAT, 0, factor);
        this.guard = new NativeGuard(where, engineArena::close);
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        try (NativeGuard.Entry _ = guard.enter()) {
            layout.execute(batch, this::run);
        }
    }

    /** One engine call for a group of requests: the n-th input times the factor is the n-th output. */
    private Map<String, Tensor> run(RowBatch b) {
        for (int i = 0; i < b.size(); i++) {
            if (Boolean.TRUE.equals(b.request(i).request().parameters().get("fail"))) {
                // thrown for the group: BatchLayout runs each request alone, and only this one fails
                throw BackplaneException.invalid("request " + b.request(i).id() + " asked to fail (parameter fail=true)");
            }
        }
        float factor = engineState.get(LE_FLOAT, 0);
        Map<String, Tensor> out = new LinkedHashMap<>();
        try (Arena arena = Arena.ofConfined()) {
            for (int k = 0; k < inputs.size(); k++) {
                String input = inputs.get(k);
                if (!b.has(input)) {
                    continue;
                }
                MemorySegment x = b.stack(input, arena); // every request's rows, in request order
                float[] y = new float[(int) (x.byteSize() / Float.BYTES)];
                for (int j = 0; j < y.length; j++) {
                    y[j] = x.getAtIndex(LE_FLOAT, j) * factor;
                }
                out.put(outputs.get(k), Tensor.ofFloats(outputs.get(k), b.shape(input), y)); // heap memory: outlives the arena
            }
        }
        return out;
    }

    @Override
    public void close() {
        guard.close(); // frees the engine state now, or when an execute still inside it leaves
    }
}
