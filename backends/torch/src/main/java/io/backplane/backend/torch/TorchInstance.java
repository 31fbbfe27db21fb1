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
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One instance: its own TorchScript module on its own DJL manager. {@code execute} groups the batch's
 * requests by their non-batch shapes, stacks each group's rows into one forward() call (when the
 * model batches), and splits every output back by rows; when a group of several requests fails,
 * each runs again alone so that one bad request fails only itself. The module is freed by the
 * guard only after the last execute left native code, so a close racing an abandoned execute never
 * frees it under libtorch.
 */
final class TorchInstance implements ModelInstance {
    private static final Logger LOG = LoggerFactory.getLogger(TorchInstance.class);

    private final String model;
    private final ModelConfig config;
    private final Bindings bindings;
    private final TorchSettings settings;
    private final PtNDManager manager;
    private final PtSymbolBlock module;
    private final ModuleGuard guard;

    private TorchInstance(String model, ModelConfig config, Bindings bindings, TorchSettings settings, PtNDManager manager, PtSymbolBlock module) {
        this.model = model;
        this.config = config;
        this.bindings = bindings;
        this.settings = settings;
        this.manager = manager;
        this.module = module;
        this.guard = new ModuleGuard(() -> {
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
        if (!guard.enter()) {
            for (ScheduledRequest r : batch) {
                r.sender().sendError(BackplaneException.unavailable("model '" + model + "' instance is closed"));
            }
            return;
        }
        try {
            for (List<ScheduledRequest> group : group(batch)) {
                runIsolated(group);
            }
        } finally {
            guard.exit();
        }
    }

    /** Requests of equal non-batch input shapes run together when the model batches; each alone otherwise. */
    private List<List<ScheduledRequest>> group(List<ScheduledRequest> batch) {
        Map<List<Object>, List<ScheduledRequest>> groups = new LinkedHashMap<>();
        int solo = 0;
        for (ScheduledRequest r : batch) {
            if (r.isCancelled()) {
                r.sender().sendError(new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " to model '" + model
                        + "' was cancelled before it ran"));
                continue;
            }
            List<Object> key = new ArrayList<>();
            if (config.batches()) {
                for (TensorConfig t : bindings.inputs()) {
                    Tensor in = r.request().input(t.name());
                    long[] s = in == null ? new long[0] : in.shape();
                    key.add(t.name());
                    key.add(Arrays.stream(s, Math.min(1, s.length), s.length).boxed().toList());
                }
            } else {
                key.add(solo++);
            }
            groups.computeIfAbsent(key, k -> new ArrayList<>()).add(r);
        }
        return List.copyOf(groups.values());
    }

    private void runIsolated(List<ScheduledRequest> group) {
        try {
            run(group);
        } catch (RuntimeException e) {
            if (group.size() > 1) {
                LOG.debug("model '{}': a group of {} requests failed ({}); each runs alone", model, group.size(), e.toString());
                for (ScheduledRequest r : group) {
                    runIsolated(List.of(r));
                }
                return;
            }
            ScheduledRequest r = group.getFirst();
            if (!r.sender().isClosed()) {
                r.sender().sendError(e instanceof BackplaneException b ? b
                        : new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "' forward() failed for request " + r.id() + ": "
                                + firstLine(e), e));
            }
        }
    }

    private void run(List<ScheduledRequest> group) {
        int[] rows = new int[group.size()];
        int total = 0;
        for (int i = 0; i < rows.length; i++) {
            rows[i] = config.batches() ? group.get(i).batchSize() : 1;
            total += rows[i];
        }
        List<IValue> values = new ArrayList<>();
        try (PtNDManager nd = (PtNDManager) manager.newSubManager(); Arena arena = Arena.ofConfined()) {
            List<TensorConfig> ins = bindings.inputs();
            IValue[] args = new IValue[ins.size()];
            for (int p = 0; p < ins.size(); p++) {
                args[p] = track(values, IValue.from(input(nd, arena, group, ins.get(p), total)));
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
            List<TensorConfig> outs = config.outputs();
            List<List<Tensor>> perRequest = new ArrayList<>();
            for (int i = 0; i < group.size(); i++) {
                perRequest.add(new ArrayList<>());
            }
            for (int o = 0; o < outs.size(); o++) {
                TensorConfig oc = outs.get(o);
                int e = bindings.outputs()[o];
                if (e >= elements.size() || !elements.get(e).isTensor()) {
                    throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "': output '" + oc.name() + "' is element " + e
                            + " of forward()'s result, which has " + elements.size() + (elements.size() == 1 ? " element" : " elements")
                            + " (" + result.getType() + "); fix the output names or the model");
                }
                PtNDArray t = elements.get(e).toTensor(nd);
                split(oc, t, group, rows, total, perRequest);
            }
            for (int i = 0; i < group.size(); i++) {
                ScheduledRequest r = group.get(i);
                List<String> asked = r.request().requestedOutputs();
                List<Tensor> send = asked.isEmpty() ? perRequest.get(i)
                        : perRequest.get(i).stream().filter(t -> asked.contains(t.name())).toList();
                r.sender().sendFinal(InferenceResponse.of(send));
            }
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

    /** The group's rows of one input as a libtorch tensor over memory that lives until {@code arena} closes. */
    private PtNDArray input(PtNDManager nd, Arena arena, List<ScheduledRequest> group, TensorConfig tc, int total) {
        long bytes = 0;
        long[] first = null;
        for (ScheduledRequest r : group) {
            Tensor t = r.request().input(tc.name());
            if (t == null) {
                throw BackplaneException.invalid("model '" + model + "' needs input '" + tc.name() + "' for forward(), which request " + r.id()
                        + " does not have");
            }
            if (first == null) {
                first = t.shape();
            }
            bytes += t.byteSize();
        }
        MemorySegment data;
        Tensor only = group.getFirst().request().input(tc.name());
        if (group.size() == 1 && only.data().isNative() && only.data().address() % 8 == 0) {
            data = only.data();
        } else {
            data = arena.allocate(Math.max(bytes, 1), 64);
            long at = 0;
            for (ScheduledRequest r : group) {
                MemorySegment src = r.request().input(tc.name()).data();
                MemorySegment.copy(src, 0, data, at, src.byteSize());
                at += src.byteSize();
            }
        }
        long[] shape = first.clone();
        if (config.batches()) {
            shape[0] = total;
        }
        if (tc.reshape() != null) {
            List<Long> re = tc.reshape();
            long[] s = new long[re.size() + (config.batches() ? 1 : 0)];
            int k = 0;
            if (config.batches()) {
                s[k++] = total;
            }
            for (long d : re) {
                s[k++] = d;
            }
            shape = s;
        }
        ai.djl.ndarray.types.DataType type = TorchTypes.toDjl(tc.dataType());
        return nd.create(data.asSlice(0, bytes).asByteBuffer().order(ByteOrder.nativeOrder()), new Shape(shape), type);
    }

    private void split(TensorConfig oc, PtNDArray t, List<ScheduledRequest> group, int[] rows, int total, List<List<Tensor>> perRequest) {
        DataType type = TorchTypes.fromDjl(t.getDataType());
        if (type != oc.dataType()) {
            throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "': output '" + oc.name() + "' is " + t.getDataType()
                    + " in libtorch but the config declares " + oc.dataType() + "; declare data_type " + (type == null ? "of a supported type"
                            : "TYPE_" + type.name()) + " for it");
        }
        long[] shape = t.getShape().getShape();
        byte[] bytes = t.toByteArray();
        if (!config.batches()) {
            perRequest.getFirst().add(Tensor.ofRaw(oc.name(), type, outShape(oc, shape, -1), bytes));
            return;
        }
        if (shape.length == 0 || shape[0] != total) {
            throw new BackplaneException(ErrorCode.INTERNAL, "model '" + model + "': output '" + oc.name() + "' has shape " + Arrays.toString(shape)
                    + " but the batch had " + total + " rows; a batching model's outputs keep the batch dimension first");
        }
        long rowBytes = bytes.length / Math.max(total, 1);
        int at = 0;
        for (int i = 0; i < group.size(); i++) {
            byte[] part = Arrays.copyOfRange(bytes, at, at + (int) (rowBytes * rows[i]));
            at += part.length;
            perRequest.get(i).add(Tensor.ofRaw(oc.name(), type, outShape(oc, shape, rows[i]), part));
        }
    }

    /** The shape a client sees: the model's, its batch dimension replaced by the request's rows; config dims where the output is reshaped. */
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
        long[] s = modelShape.clone();
        if (rows >= 0) {
            s[0] = rows;
        }
        return s;
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

    /** Frees the module once closed and no execute is inside native code (stand-in for the SPI's NativeGuard). */
    static final class ModuleGuard {
        private final Runnable release;
        private int open;
        private boolean closed;
        private boolean released;

        ModuleGuard(Runnable release) {
            this.release = release;
        }

        synchronized boolean enter() {
            if (closed) {
                return false;
            }
            open++;
            return true;
        }

        void exit() {
            boolean now;
            synchronized (this) {
                open--;
                now = closed && open == 0 && !released;
                released |= now;
            }
            if (now) {
                release.run();
            }
        }

        void close() {
            boolean now;
            synchronized (this) {
                closed = true;
                now = open == 0 && !released;
                released |= now;
            }
            if (now) {
                release.run();
            }
        }
    }
}
