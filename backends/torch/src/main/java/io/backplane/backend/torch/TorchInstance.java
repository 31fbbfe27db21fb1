package io.backplane.backend.torch;

import ai.djl.engine.Engine;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import ai.djl.pytorch.jni.JniUtils;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.engine.BatchLayout;
import io.backplane.spi.engine.NativeGuard;
import io.backplane.spi.engine.RowBatch;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One instance: its own TorchScript module on its own DJL manager. {@code execute} hands the batch to
 * the SPI's {@link BatchLayout}: requests of equal non-batch shapes form one {@link RowBatch}, whose
 * rows are stacked into one forward() call (when the model batches) and whose outputs are split
 * back by rows; when a group of several requests fails, each runs again alone so that one bad
 * request fails only itself. A {@link NativeGuard} frees the module only after the last execute
 * left native code, so a close racing an abandoned execute never frees it under libtorch.
 */
final class TorchInstance implements ModelInstance {

    private final String model;
    private final ModelConfig config;
    private final Bindings bindings;
    private final TorchSettings settings;
    private final PtNDManager manager;
    private final PtSymbolBlock module;
    private final BatchLayout layout;
    private final NativeGuard guard;

    private TorchInstance(String model, ModelConfig config, Bindings bindings, TorchSettings settings, PtNDManager manager, PtSymbolBlock module) {
        this.model = model;
        this.config = config;
        this.bindings = bindings;
        this.settings = settings;
        this.manager = manager;
        this.module = module;
        this.layout = BatchLayout.of(config);
        this.guard = new NativeGuard("model '" + model + "' instance", () -> {
            module.close();
            manager.close();
        });
    }

    static TorchInstance load(String model, ModelConfig config, Path file, Bindings bindings, TorchSettings settings, Engine engine) {
        PtNDManager manager = (PtNDManager) engine.newBaseManager();
        try {
            PtSymbolBlock module = JniUtils.loadModule(manager, file, true, new String[0], new String[0], false);
            JniUtils.enableInferenceMode(module); // eval(): dropout and batch-norm in inference behaviour
            return new TorchInstance(model, config, bindings, settings, manager, module);
        } catch (RuntimeException e) {
            manager.close();
            throw BackplaneException.invalid("model '" + model + "': libtorch " + engine.getVersion() + " could not load " + file + ": "
                    + firstLine(e) + "; save the model with torch.jit.trace or torch.jit.script and torch.jit.save");
        }
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        try (NativeGuard.Entry _ = guard.enter()) {
            layout.execute(batch, this::runGroup);
        }
    }

    /** One forward() for the group; a libtorch failure of a lone request is INTERNAL naming the request, a close UNAVAILABLE. */
    private Map<String, Tensor> runGroup(RowBatch group) {
        try {
            return runOnce(group);
        } catch (BackplaneException e) {
            throw e;
        } catch (RuntimeException e) {
            if (group.size() > 1) {
                throw e; // the layout runs each request alone, so that a bad request fails only itself
            }
            throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "' forward() failed for request " + group.request(0).id()
                    + ": " + firstLine(e), e);
        }
    }

    private Map<String, Tensor> runOnce(RowBatch group) {
        List<IValue> values = new ArrayList<>();
        try (PtNDManager nd = (PtNDManager) manager.newSubManager(); Arena arena = Arena.ofConfined()) {
            List<TensorConfig> ins = bindings.inputs();
            IValue[] args = new IValue[ins.size()];
            for (int p = 0; p < ins.size(); p++) {
                args[p] = track(values, IValue.from(input(nd, arena, group, ins.get(p))));
            }
            JniUtils.setGraphExecutorOptimize(settings.optimizedExecution()); // thread-local in libtorch: set where forward() runs
            if (settings.intraOpThreads() > 0) {
                JniUtils.setNumThreads(settings.intraOpThreads());
            }
            IValue result = track(values, module.forward(args));
            List<IValue> elements = new ArrayList<>();
            if (result.isTensor()) {
                elements.add(result);
            } else if (result.isTuple()) {
                for (IValue v : result.toIValueTuple()) {
                    elements.add(track(values, v));
                }
            } else if (result.isTensorList() || result.isList()) {
                for (IValue v : result.toIValueArray()) {
                    elements.add(track(values, v));
                }
            } else {
                throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "': forward() returned " + result.getType()
                        + "; the pytorch backend serves a tensor, or a tuple or list of tensors");
            }
            Map<String, Tensor> out = new LinkedHashMap<>();
            List<TensorConfig> outs = config.outputs();
            Set<String> wanted = group.outputs();
            for (int o = 0; o < outs.size(); o++) {
                TensorConfig oc = outs.get(o);
                if (!wanted.contains(oc.name())) {
                    continue;
                }
                int e = bindings.outputs()[o];
                if (e >= elements.size() || !elements.get(e).isTensor()) {
                    throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "': output '" + oc.name() + "' is element " + e
                            + " of forward()'s result, which has " + elements.size() + (elements.size() == 1 ? " element" : " elements")
                            + " (" + result.getType() + "); fix the output names or the model");
                }
                out.put(oc.name(), output(oc, elements.get(e).toTensor(nd), group.rows()));
            }
            return out;
        } finally {
            for (IValue v : values.reversed()) {
                v.close();
            }
        }
    }

    private static IValue track(List<IValue> values, IValue v) {
        values.add(v);
        return v;
    }

    /** The group's rows of one input as a libtorch tensor over memory that lives until {@code arena} closes (or the request is answered). */
    private PtNDArray input(PtNDManager nd, Arena arena, RowBatch group, TensorConfig tc) {
        if (!group.has(tc.name())) {
            throw BackplaneException.invalid("model '" + model + "' needs input '" + tc.name() + "' for forward(), which request "
                    + group.request(0).id() + " does not have");
        }
        MemorySegment data = group.stack(tc.name(), arena);
        Tensor own = group.input(0, tc.name());
        if (group.size() == 1 && own != null && own.data().isNative() && own.data().address() == data.address()) {
            // libtorch wraps native memory in place (from_blob): a model's in-place op (x /= 255) would write into the
            // client's memory (a shared-memory region, another step's output). Triton copies inputs; so does this backend.
            data = arena.allocate(data.byteSize(), 64).copyFrom(data);
        }
        long[] shape = group.shape(tc.name());
        if (tc.reshape() != null) {
            List<Long> re = tc.reshape();
            long[] s = new long[re.size() + (config.batches() ? 1 : 0)];
            int k = 0;
            if (config.batches()) {
                s[k++] = group.rows();
            }
            for (long d : re) {
                s[k++] = d;
            }
            shape = s;
        }
        return nd.create(data.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN), new Shape(shape), TorchTypes.toDjl(tc.dataType()));
    }

    /** An output copied out of libtorch (the group's answers outlive its tensors), checked against the config's type. */
    private Tensor output(TensorConfig oc, PtNDArray t, int rows) {
        DataType type = TorchTypes.fromDjl(t.getDataType());
        if (type != oc.dataType()) {
            throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "': output '" + oc.name() + "' is " + t.getDataType()
                    + " in libtorch but the config declares " + oc.dataType() + "; declare data_type " + (type == null ? "of a supported type"
                            : "TYPE_" + type.name()) + " for it");
        }
        long[] shape = t.getShape().getShape();
        if (config.batches() && oc.reshape() == null && (shape.length == 0 || shape[0] != rows)) {
            throw BackplaneException.internal("model '" + model + "': output '" + oc.name() + "' came back with shape " + Arrays.toString(shape)
                    + " for a batch of " + rows + " rows; a batching model's outputs keep the batch as their first dimension (or set"
                    + " max_batch_size: 0)");
        }
        return Tensor.ofRaw(oc.name(), type, outShape(oc, shape, config.batches() ? rows : -1), t.toByteArray());
    }

    /** The shape of the group's output: the model's; the config's dims (after the batch's rows) where the output is reshaped. */
    private static long[] outShape(TensorConfig oc, long[] modelShape, int rows) {
        boolean reshaped = oc.reshape() != null && oc.dims().stream().allMatch(d -> d >= 0);
        if (reshaped) {
            long[] s = new long[oc.dims().size() + (rows >= 0 ? 1 : 0)];
            int k = 0;
            if (rows >= 0) {
                s[k++] = rows;
            }
            for (long d : oc.dims()) {
                s[k++] = d;
            }
            return s;
        }
        return modelShape.clone(); // a batching model's first dimension is the batch's rows (checked above); RowBatch splits it
    }

    private static String firstLine(Throwable e) {
        String m = e.getMessage() == null ? e.toString() : e.getMessage();
        int nl = m.indexOf('\n');
        return nl < 0 ? m : m.substring(0, nl);
    }

    @Override
    public void close() {
        guard.close();
    }
}
