package io.backplane.backend.cpu;

import static java.util.Objects.requireNonNull;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OnnxValue;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.OrtSession.RunOptions;
import ai.onnxruntime.TensorInfo;
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
import java.lang.reflect.Array;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One ONNX Runtime session executing batches.
 *
 * <p><b>Batching</b> is the SPI's ({@link BatchLayout}, {@link RowBatch}): the requests of a batch
 * are checked and grouped by their non-batch shapes (and which optional inputs they carry); each
 * group runs as one ORT call. Inputs: a single request whose tensor lives in native memory is
 * handed to ORT in place; otherwise each input's rows are copied once into one native buffer (an
 * arena freed when the call ends). Outputs: pre-sized ones ORT writes in place; others are copied
 * once to the heap; each request gets a slice. When a group of several requests fails inside ORT,
 * each request is retried alone, so a bad request fails only itself.
 *
 * <p><b>Close</b> goes through a {@link NativeGuard}: {@code close} may come from another thread
 * while an abandoned {@code execute} is still inside ORT; then it asks ORT to terminate the run and
 * the executing thread releases the session when ORT returns, never under its feet.
 */
final class OnnxInstance implements ModelInstance {
    private static final Logger LOG = LoggerFactory.getLogger(OnnxInstance.class);

    private final ModelConfig config;
    private final BatchLayout layout;
    private final String where;
    private final OrtSession session;
    private final RunOptions runOptions;
    /** Outputs whose shape follows from the inputs' before the run: ORT writes them straight into the response's memory. */
    private final Map<String, ShapeRule> presized;
    /** Cleared when ORT refused a pre-sized output (its shape did not follow the model's declared dimensions). */
    private volatile boolean presizeOutputs = true;
    private final NativeGuard guard;

    OnnxInstance(OnnxModel model, String where, OrtSession session) throws OrtException {
        this.config = requireNonNull(model, "model is null").config();
        this.layout = BatchLayout.of(config);
        this.where = requireNonNull(where, "where is null");
        this.session = requireNonNull(session, "session is null");
        RunOptions options;
        try {
            options = new RunOptions();
            try {
                for (Map.Entry<String, String> e : model.settings().runConfigEntries().entrySet()) {
                    options.addRunConfigEntry(e.getKey(), e.getValue());
                }
            } catch (OrtException | RuntimeException e) {
                options.close();
                throw e;
            }
        } catch (OrtException | RuntimeException e) {
            OnnxModel.closeSession(session, where);
            throw e;
        }
        this.runOptions = options;
        Map<String, ShapeRule> rules;
        try {
            rules = ShapeRule.of(config, session);
        } catch (OrtException | RuntimeException e) {
            options.close();
            OnnxModel.closeSession(session, where);
            throw e;
        }
        this.presized = rules;
        this.guard = new NativeGuard(where, this::release).onInterrupt(this::terminate);
    }

    /**
     * How an output's shape follows from the inputs': each dimension is fixed in the model, or a
     * symbolic dimension (such as {@code batch} or {@code sequence}) that an input has too.
     *
     * @param fixed the size of each dimension, or -1 where it comes from an input
     * @param input the input's name for a dimension from an input
     * @param inputDim the dimension of that input
     */
    record ShapeRule(long[] fixed, String[] input, int[] inputDim) {
        static Map<String, ShapeRule> of(ModelConfig config, OrtSession session) throws OrtException {
            Map<String, String[]> inputDims = new java.util.HashMap<>();
            for (var e : session.getInputInfo().entrySet()) {
                if (e.getValue().getInfo() instanceof TensorInfo ti) {
                    inputDims.put(e.getKey(), ti.getDimensionNames());
                }
            }
            Map<String, ShapeRule> rules = new java.util.HashMap<>();
            var outputs = session.getOutputInfo();
            outer:
            for (TensorConfig out : config.outputs()) {
                if (out.dataType() == DataType.BYTES || !OrtTypes.canCreate(out.dataType()) || !outputs.containsKey(out.name())
                        || !(outputs.get(out.name()).getInfo() instanceof TensorInfo ti)) {
                    continue;
                }
                long[] shape = ti.getShape();
                String[] names = ti.getDimensionNames();
                String[] input = new String[shape.length];
                int[] inputDim = new int[shape.length];
                for (int d = 0; d < shape.length; d++) {
                    if (shape[d] >= 0) {
                        continue;
                    }
                    String name = d < names.length ? names[d] : "";
                    if (name == null || name.isEmpty()) {
                        continue outer;
                    }
                    boolean found = false;
                    for (var in : inputDims.entrySet()) {
                        String[] dims = in.getValue();
                        for (int k = 0; k < dims.length && !found; k++) {
                            if (name.equals(dims[k])) {
                                input[d] = in.getKey();
                                inputDim[d] = k;
                                found = true;
                            }
                        }
                        if (found) {
                            break;
                        }
                    }
                    if (!found) {
                        continue outer;
                    }
                }
                rules.put(out.name(), new ShapeRule(shape, input, inputDim));
            }
            return Map.copyOf(rules);
        }

        /** The output's shape for these feeds, or null where an input it needs is absent. */
        long @org.jspecify.annotations.Nullable [] shape(Map<String, long[]> feedShapes) {
            long[] s = fixed.clone();
            for (int d = 0; d < s.length; d++) {
                if (s[d] < 0) {
                    long[] in = feedShapes.get(input[d]);
                    if (in == null || inputDim[d] >= in.length) {
                        return null;
                    }
                    s[d] = in[inputDim[d]];
                }
            }
            return s;
        }
    }

    @Override
    public void execute(List<ScheduledRequest> batch) {
        try (NativeGuard.Entry _ = guard.enter()) {
            layout.execute(batch, this::runGroup);
        }
    }

    /** One ORT call for the group; an ORT failure of a lone request is INTERNAL, a wrong value INVALID_ARGUMENT, a close UNAVAILABLE. */
    private Map<String, Tensor> runGroup(RowBatch group) throws OrtException {
        try {
            return runOnce(group);
        } catch (OrtException | IllegalStateException | IllegalArgumentException e) {
            if (guard.isClosed()) {
                // close() set ORT's terminate flag: the run was stopped on purpose, not by these requests
                throw BackplaneException.unavailable(where + " was closed while this request ran");
            }
            if (group.size() > 1 && e instanceof OrtException ort) {
                throw ort; // the layout runs each request alone, so that a bad request fails only itself
            }
            throw new BackplaneException(e instanceof OrtException ? ErrorCode.INTERNAL : ErrorCode.INVALID_ARGUMENT,
                    where + ": ONNX Runtime failed: " + e.getMessage(), e);
        }
    }

    private Map<String, Tensor> runOnce(RowBatch group) throws OrtException {
        Map<String, OnnxTensor> feeds = new LinkedHashMap<>();
        Map<String, OnnxTensor> pinned = new LinkedHashMap<>();
        Map<String, MemorySegment> pinnedMemory = new java.util.HashMap<>();
        try (Arena arena = Arena.ofConfined()) {
            try {
                for (TensorConfig input : config.inputs()) {
                    if (group.has(input.name())) {
                        feeds.put(input.name(), feed(input, group, arena));
                    }
                }
                Set<String> wanted = group.outputs();
                presize(feeds, wanted, pinned, pinnedMemory);
                OrtSession.Result run;
                try {
                    run = runPinned(feeds, wanted, pinned);
                } catch (OrtException e) {
                    if (pinned.isEmpty()) {
                        throw e;
                    }
                    // ORT computed another shape than the model declares for a pre-sized output; if the plain run
                    // succeeds, that was the cause: this instance stops pre-sizing outputs.
                    closeAll(pinned);
                    pinnedMemory.clear();
                    run = session.run(feeds, wanted, runOptions);
                    presizeOutputs = false;
                    LOG.info("{}: ONNX Runtime refused pre-sized outputs ({}); outputs are copied out of its memory from now on", where,
                            e.getMessage());
                }
                Map<String, Tensor> outputs = new LinkedHashMap<>();
                try (OrtSession.Result result = run) {
                    for (TensorConfig out : config.outputs()) {
                        if (!wanted.contains(out.name())) {
                            continue;
                        }
                        MemorySegment memory = pinnedMemory.get(out.name());
                        OnnxValue value = memory != null ? pinned.get(out.name()) : result.get(out.name()).orElseThrow(
                                () -> BackplaneException.internal(where + ": ONNX Runtime returned no output '" + out.name() + "'"));
                        outputs.put(out.name(), whole(out, value, memory));
                    }
                }
                return outputs;
            } finally {
                closeAll(feeds);
                closeAll(pinned);
            }
        }
    }

    private static void closeAll(Map<String, OnnxTensor> tensors) {
        for (OnnxTensor t : tensors.values()) {
            t.close();
        }
        tensors.clear();
    }

    /**
     * Output tensors ORT fills in place: for every wanted output whose shape follows from the
     * feeds' (see {@link ShapeRule}), native memory of that size that the responses then hold (the
     * garbage collector frees it with the last response that references it).
     */
    private void presize(Map<String, OnnxTensor> feeds, Set<String> wanted, Map<String, OnnxTensor> pinned, Map<String, MemorySegment> memory)
            throws OrtException {
        if (!presizeOutputs || presized.isEmpty()) {
            return;
        }
        Map<String, long[]> shapes = new java.util.HashMap<>();
        for (var e : feeds.entrySet()) {
            shapes.put(e.getKey(), e.getValue().getInfo().getShape());
        }
        for (TensorConfig out : config.outputs()) {
            ShapeRule rule = presized.get(out.name());
            if (rule == null || !wanted.contains(out.name())) {
                continue;
            }
            long[] shape = rule.shape(shapes);
            if (shape == null) {
                continue;
            }
            long bytes = Tensor.elementCount(out.name(), shape) * out.dataType().byteSize();
            if (bytes <= 0 || bytes > Integer.MAX_VALUE - 64) {
                continue;
            }
            MemorySegment m = Arena.ofAuto().allocate(bytes, 64);
            pinned.put(out.name(), OrtTypes.create(Ort.environment(), m.asByteBuffer().order(ByteOrder.nativeOrder()), shape, out.dataType()));
            memory.put(out.name(), m);
        }
    }

    private OrtSession.Result runPinned(Map<String, OnnxTensor> feeds, Set<String> wanted, Map<String, OnnxTensor> pinned) throws OrtException {
        if (pinned.isEmpty()) {
            return session.run(feeds, wanted, runOptions);
        }
        Set<String> rest = new LinkedHashSet<>(wanted);
        rest.removeAll(pinned.keySet());
        return session.run(feeds, rest, pinned, runOptions);
    }

    /** One ORT input tensor holding the input's rows of every request in the group, in request order. */
    private OnnxTensor feed(TensorConfig input, RowBatch group, Arena arena) throws OrtException {
        long[] shape = group.shape(input.name());
        if (input.dataType() == DataType.BYTES) {
            List<byte[]> elements = group.stackBytes(input.name());
            String[] strings = new String[elements.size()];
            for (int e = 0; e < strings.length; e++) {
                strings[e] = Utf8.decode(elements.get(e), input.name(), e);
            }
            return OnnxTensor.createTensor(Ort.environment(), strings, shape);
        }
        // native and aligned, as ORT reads it: a lone request's own memory in place, else one copy in the arena
        MemorySegment data = group.stack(input.name(), arena);
        return OrtTypes.create(Ort.environment(), data.asByteBuffer().order(ByteOrder.nativeOrder()), shape, input.dataType());
    }

    /** Output {@code out} of the whole group as one tensor, in memory that outlives the ORT result (the group cuts it per request). */
    private Tensor whole(TensorConfig out, OnnxValue value, @org.jspecify.annotations.Nullable MemorySegment presizedMemory) throws OrtException {
        if (!(value instanceof OnnxTensor tensor)) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, where + ": output '" + out.name() + "' is a " + value.getType()
                    + ", not a tensor");
        }
        TensorInfo info = tensor.getInfo();
        long[] shape = info.getShape();
        DataType type = OrtTypes.dataType(info.onnxType);
        if (type != out.dataType()) {
            throw BackplaneException.internal(where + ": output '" + out.name() + "' came back as " + OrtTypes.onnxName(info.onnxType)
                    + " but the config says " + out.dataType().configName());
        }
        if (type == DataType.BYTES) {
            String[] flat = new String[Math.toIntExact(Tensor.elementCount(out.name(), shape))];
            flatten(tensor.getValue(), flat, 0);
            List<byte[]> bytes = new ArrayList<>(flat.length);
            for (String e : flat) {
                bytes.add(e.getBytes(StandardCharsets.UTF_8));
            }
            return Tensor.ofBytes(out.name(), shape, bytes);
        }
        // ORT wrote a pre-sized output in place; otherwise the one copy: ORT's memory is freed when the result closes
        MemorySegment all = presizedMemory != null ? presizedMemory : MemorySegment.ofArray(tensor.getByteBuffer().array());
        return Tensor.of(out.name(), type, shape, all);
    }

    private static int flatten(Object value, String[] out, int at) {
        if (value instanceof String s) {
            out[at] = s;
            return at + 1;
        }
        int n = Array.getLength(value);
        int pos = at;
        for (int i = 0; i < n; i++) {
            pos = flatten(Array.get(value, i), out, pos);
        }
        return pos;
    }

    @Override
    public boolean isReady() {
        return !guard.isClosed();
    }

    @Override
    public void close() {
        guard.close();
    }

    /** Asks ORT to stop the batch still running when {@code close} comes; the guard then frees the session when it returns. */
    private void terminate() {
        try {
            runOptions.setTerminate(true);
        } catch (OrtException e) {
            LOG.warn("{}: could not ask ONNX Runtime to stop the running batch", where, e);
        }
        LOG.warn("{}: closed while a batch is still inside ONNX Runtime; the session is released when it returns", where);
    }

    /** Frees the session; the guard calls it once, when no run is in flight. */
    private void release() {
        runOptions.close();
        OnnxModel.closeSession(session, where);
        LOG.debug("{}: session released", where);
    }

    /** Strict UTF-8: ORT's Java API carries strings as Java Strings, so BYTES elements must be text. */
    static final class Utf8 {
        private Utf8() {
        }

        static String decode(byte[] bytes, String tensor, int element) {
            try {
                return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(bytes)).toString();
            } catch (java.nio.charset.CharacterCodingException e) {
                throw BackplaneException.invalid("input '" + tensor + "' element " + element + " is not valid UTF-8; the cpu backend"
                        + " passes BYTES to ONNX Runtime as UTF-8 text (ORT's Java API has no raw byte strings)");
            }
        }
    }

}
