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
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Array;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
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
 * <p><b>Batching.</b> The requests of a batch are grouped by their non-batch shapes (and which
 * optional inputs they carry); each group runs as one ORT call. Inputs: a single request whose
 * tensor lives in native memory is handed to ORT in place; otherwise each input's rows are copied
 * once into one native buffer (an arena freed when the call ends). Outputs: ORT's result is copied
 * once to the heap, and each request gets a slice of that copy. When a group of several requests
 * fails inside ORT, each request is retried alone, so a bad request fails only itself.
 *
 * <p><b>Close.</b> {@code close} may come from another thread while an abandoned {@code execute}
 * is still inside ORT; then it asks ORT to terminate the run and the executing thread releases the
 * session when ORT returns, never under its feet.
 */
final class OnnxInstance implements ModelInstance {
    private static final Logger LOG = LoggerFactory.getLogger(OnnxInstance.class);

    private final ModelConfig config;
    private final Layout layout;
    private final String where;
    private final OrtSession session;
    private final RunOptions runOptions;
    /** Outputs whose shape follows from the inputs' before the run: ORT writes them straight into the response's memory. */
    private final Map<String, ShapeRule> presized;
    /** Cleared when ORT refused a pre-sized output (its shape did not follow the model's declared dimensions). */
    private volatile boolean presizeOutputs = true;
    private final Object lock = new Object();
    private boolean running;
    private boolean closeRequested;
    private boolean released;

    OnnxInstance(OnnxModel model, String where, OrtSession session) throws OrtException {
        this.config = requireNonNull(model, "model is null").config();
        this.layout = new Layout(config);
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
        synchronized (lock) {
            if (closeRequested) {
                throw BackplaneException.unavailable(where + " is closed");
            }
            running = true;
        }
        try {
            executeOpen(batch);
        } finally {
            synchronized (lock) {
                running = false;
                if (closeRequested) {
                    release();
                }
            }
        }
    }

    private void executeOpen(List<ScheduledRequest> batch) {
        Map<Object, List<Item>> groups = new LinkedHashMap<>();
        for (ScheduledRequest r : batch) {
            if (r.sender().isClosed()) {
                continue;
            }
            if (r.isCancelled()) {
                end(r, InferenceResponse.error(new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " to " + where
                        + " was cancelled before it ran")));
                continue;
            }
            Item item;
            try {
                item = Item.of(r, layout);
            } catch (BackplaneException e) {
                end(r, InferenceResponse.error(e));
                continue;
            }
            // Without batching every request runs alone; with it, requests of equal shapes run together.
            Object key = config.batches() ? item.key : item;
            groups.computeIfAbsent(key, k -> new ArrayList<>()).add(item);
        }
        for (List<Item> group : groups.values()) {
            runGroup(group);
        }
    }

    private void runGroup(List<Item> group) {
        Exception failure = null;
        try {
            runOnce(group);
        } catch (OrtException | BackplaneException | IllegalStateException | IllegalArgumentException e) {
            failure = e;
        }
        if (failure == null) {
            return;
        }
        boolean closing;
        synchronized (lock) {
            closing = closeRequested;
        }
        if (closing) {
            // close() set ORT's terminate flag: the run was stopped on purpose, not by these requests
            BackplaneException error = BackplaneException.unavailable(where + " was closed while this request ran");
            for (Item item : group) {
                end(item.request, InferenceResponse.error(error));
            }
            return;
        }
        if (group.size() > 1 && failure instanceof OrtException) {
            LOG.debug("{}: a batch of {} requests failed in ONNX Runtime; running each alone", where, group.size(), failure);
            for (Item item : group) {
                runGroup(List.of(item));
            }
            return;
        }
        BackplaneException error = failure instanceof BackplaneException be ? be
                : new BackplaneException(failure instanceof OrtException ? ErrorCode.INTERNAL : ErrorCode.INVALID_ARGUMENT,
                        where + ": ONNX Runtime failed: " + failure.getMessage(), failure);
        for (Item item : group) {
            end(item.request, InferenceResponse.error(error));
        }
    }

    private void runOnce(List<Item> group) throws OrtException {
        int rows = 0;
        for (Item item : group) {
            rows += item.rows;
        }
        Map<String, OnnxTensor> feeds = new LinkedHashMap<>();
        Map<String, OnnxTensor> pinned = new LinkedHashMap<>();
        Map<String, MemorySegment> pinnedMemory = new java.util.HashMap<>();
        try (Arena arena = Arena.ofConfined()) {
            try {
                for (int k = 0; k < config.inputs().size(); k++) {
                    if (group.getFirst().inputs[k] != null) {
                        feeds.put(config.inputs().get(k).name(), feed(config.inputs().get(k), group, k, rows, arena));
                    }
                }
                Set<String> wanted = new LinkedHashSet<>();
                for (Item item : group) {
                    wanted.addAll(item.outputs);
                }
                List<List<Tensor>> answers = new ArrayList<>(group.size());
                for (int i = 0; i < group.size(); i++) {
                    answers.add(new ArrayList<>());
                }
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
                try (OrtSession.Result result = run) {
                    for (TensorConfig out : config.outputs()) {
                        if (!wanted.contains(out.name())) {
                            continue;
                        }
                        MemorySegment memory = pinnedMemory.get(out.name());
                        OnnxValue value = memory != null ? pinned.get(out.name()) : result.get(out.name()).orElseThrow(
                                () -> BackplaneException.internal(where + ": ONNX Runtime returned no output '" + out.name() + "'"));
                        List<Tensor> parts = split(out, value, memory, group, rows);
                        for (int i = 0; i < group.size(); i++) {
                            if (group.get(i).outputs.contains(out.name())) {
                                answers.get(i).add(parts.get(i));
                            }
                        }
                    }
                }
                for (int i = 0; i < group.size(); i++) {
                    end(group.get(i).request, InferenceResponse.of(answers.get(i)));
                }
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

    /** One ORT input tensor holding input {@code k} of every request in the group, rows in request order. */
    private OnnxTensor feed(TensorConfig input, List<Item> group, int k, int rows, Arena arena) throws OrtException {
        Tensor first = group.getFirst().inputs[k];
        long[] shape = first.shape();
        if (config.batches()) {
            shape[0] = rows;
        }
        if (input.dataType() == DataType.BYTES) {
            List<String> strings = new ArrayList<>();
            for (Item item : group) {
                Tensor t = item.inputs[k];
                List<byte[]> elements = t.toBytesList();
                for (int e = 0; e < elements.size(); e++) {
                    strings.add(Utf8.decode(elements.get(e), t.name(), e));
                }
            }
            return OnnxTensor.createTensor(Ort.environment(), strings.toArray(String[]::new), shape);
        }
        ByteBuffer buffer;
        MemorySegment only = first.data();
        if (group.size() == 1 && only.isNative() && only.address() % input.dataType().byteSize() == 0) {
            buffer = only.asByteBuffer(); // in place: the request owns it until it is answered
        } else {
            long total = 0;
            for (Item item : group) {
                total += item.inputs[k].byteSize();
            }
            MemorySegment all = arena.allocate(total, 64);
            long offset = 0;
            for (Item item : group) {
                MemorySegment data = item.inputs[k].data();
                MemorySegment.copy(data, 0, all, offset, data.byteSize());
                offset += data.byteSize();
            }
            buffer = all.asByteBuffer();
        }
        return OrtTypes.create(Ort.environment(), buffer.order(ByteOrder.nativeOrder()), shape, input.dataType());
    }

    /** Output {@code out} cut back into one tensor per request of the group. */
    private List<Tensor> split(TensorConfig out, OnnxValue value, @org.jspecify.annotations.Nullable MemorySegment presizedMemory, List<Item> group,
            int rows) throws OrtException {
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
        if (config.batches() && (shape.length == 0 || shape[0] != rows)) {
            throw BackplaneException.internal(where + ": output '" + out.name() + "' has shape " + Arrays.toString(shape)
                    + " but the batch has " + rows + " rows; a batching model's outputs must keep the batch as first dimension");
        }
        long elements = Tensor.elementCount(out.name(), shape);
        long perRow = config.batches() ? (rows == 0 ? 0 : elements / rows) : elements;
        List<Tensor> parts = new ArrayList<>(group.size());
        if (type == DataType.BYTES) {
            String[] flat = new String[Math.toIntExact(elements)];
            flatten(tensor.getValue(), flat, 0);
            int offset = 0;
            for (Item item : group) {
                int n = Math.toIntExact(config.batches() ? perRow * item.rows : elements);
                List<byte[]> bytes = new ArrayList<>(n);
                for (int e = 0; e < n; e++) {
                    bytes.add(flat[offset + e].getBytes(StandardCharsets.UTF_8));
                }
                offset += n;
                parts.add(Tensor.ofBytes(out.name(), shapeFor(shape, item), bytes));
            }
            return parts;
        }
        MemorySegment all;
        if (presizedMemory != null) {
            all = presizedMemory; // ORT wrote the output here: no copy
        } else {
            ByteBuffer copy = tensor.getByteBuffer(); // the one copy: ORT's memory is freed when the result closes
            all = MemorySegment.ofArray(copy.array());
        }
        long rowBytes = perRow * type.byteSize();
        long offset = 0;
        for (Item item : group) {
            long size = config.batches() ? rowBytes * item.rows : all.byteSize();
            parts.add(Tensor.of(out.name(), type, shapeFor(shape, item), all.asSlice(offset, size)));
            offset += size;
        }
        return parts;
    }

    private long[] shapeFor(long[] batchShape, Item item) {
        long[] s = batchShape.clone();
        if (config.batches()) {
            s[0] = item.rows;
        }
        return s;
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

    private void end(ScheduledRequest request, InferenceResponse response) {
        if (request.sender().isClosed()) {
            return;
        }
        try {
            request.sender().send(response, io.backplane.spi.ResponseSender.FINAL);
        } catch (IllegalStateException e) {
            LOG.debug("{}: request {} ended before its answer could be sent", where, request.id(), e);
        }
    }

    @Override
    public boolean isReady() {
        synchronized (lock) {
            return !closeRequested;
        }
    }

    @Override
    public void close() {
        synchronized (lock) {
            if (closeRequested) {
                return;
            }
            closeRequested = true;
            if (!running) {
                release();
                return;
            }
            try {
                runOptions.setTerminate(true);
            } catch (OrtException e) {
                LOG.warn("{}: could not ask ONNX Runtime to stop the running batch", where, e);
            }
            LOG.warn("{}: closed while a batch is still inside ONNX Runtime; the session is released when it returns", where);
        }
    }

    /** Frees the session; called once, under the lock, when no run is in flight. */
    private void release() {
        if (released) {
            return;
        }
        released = true;
        runOptions.close();
        OnnxModel.closeSession(session, where);
        LOG.debug("{}: session released", where);
    }

    /** The config, precomputed for checking requests without allocating per lookup. */
    static final class Layout {
        final ModelConfig config;
        final Map<String, Integer> inputIndex = new java.util.HashMap<>();
        final long[][] dims;
        final Set<String> allOutputs;

        Layout(ModelConfig config) {
            this.config = config;
            dims = new long[config.inputs().size()][];
            for (int k = 0; k < dims.length; k++) {
                TensorConfig tc = config.inputs().get(k);
                inputIndex.put(tc.name(), k);
                dims[k] = (tc.reshape() != null ? tc.reshape() : tc.dims()).stream().mapToLong(Long::longValue).toArray();
            }
            Set<String> all = new LinkedHashSet<>();
            config.outputs().forEach(o -> all.add(o.name()));
            allOutputs = java.util.Collections.unmodifiableSet(all);
        }
    }

    /** The grouping key of a request: the non-batch dimensions of each input in config order, -2 for an absent optional input. */
    record ShapeKey(long[] dims) {
        @Override
        public boolean equals(Object o) {
            return o instanceof ShapeKey k && Arrays.equals(dims, k.dims);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(dims);
        }

        @Override
        public String toString() {
            return Arrays.toString(dims);
        }
    }

    /** A request checked against the config: its inputs in config order, its rows and its shape key. */
    private static final class Item {
        final ScheduledRequest request;
        final Tensor[] inputs;
        final int rows;
        final ShapeKey key;
        final Set<String> outputs;

        private Item(ScheduledRequest request, Tensor[] inputs, int rows, ShapeKey key, Set<String> outputs) {
            this.request = request;
            this.inputs = inputs;
            this.rows = rows;
            this.key = key;
            this.outputs = outputs;
        }

        static Item of(ScheduledRequest r, Layout layout) {
            ModelConfig config = layout.config;
            var req = r.request();
            Tensor[] inputs = new Tensor[layout.dims.length];
            int batchDims = config.batches() ? 1 : 0;
            int keyLength = 0;
            for (Tensor t : req.inputs()) {
                Integer k = layout.inputIndex.get(t.name());
                if (k == null) {
                    throw BackplaneException.invalid(who(config) + " has input '" + t.name() + "', which the model does not have; its inputs are "
                            + config.inputs().stream().map(TensorConfig::name).toList());
                }
                inputs[k] = t;
                keyLength += t.rank() - batchDims;
            }
            long[] key = new long[keyLength + inputs.length];
            int at = 0;
            int rows = -1;
            String rowsFrom = "";
            for (int k = 0; k < inputs.length; k++) {
                TensorConfig tc = config.inputs().get(k);
                Tensor t = inputs[k];
                if (t == null) {
                    if (!tc.optional()) {
                        throw BackplaneException.invalid(who(config) + " lacks input '" + tc.name() + "' (" + tc.dataType().protocolName()
                                + ", dims " + dims(config, tc) + ")");
                    }
                    key[at++] = -2;
                    continue;
                }
                if (t.memoryType() == io.backplane.spi.MemoryType.GPU) {
                    throw BackplaneException.invalid(who(config) + ": input '" + t.name() + "' is in GPU memory; the cpu backend needs host memory");
                }
                if (t.dataType() != tc.dataType()) {
                    throw BackplaneException.invalid(who(config) + ": input '" + t.name() + "' is " + t.dataType().protocolName()
                            + " but the model expects " + tc.dataType().protocolName());
                }
                long[] want = layout.dims[k];
                if (t.rank() != want.length + batchDims) {
                    throw BackplaneException.invalid(who(config) + ": input '" + t.name() + "' has shape " + Arrays.toString(t.shape())
                            + " but the model expects " + dims(config, tc) + " (rank " + (want.length + batchDims) + ")");
                }
                for (int d = 0; d < want.length; d++) {
                    long got = t.dim(d + batchDims);
                    if (want[d] != -1 && got != want[d]) {
                        throw BackplaneException.invalid(who(config) + ": input '" + t.name() + "' has shape " + Arrays.toString(t.shape())
                                + " but the model expects " + dims(config, tc));
                    }
                    key[at++] = got;
                }
                key[at++] = -1; // separator
                if (batchDims == 1) {
                    long n = t.dim(0);
                    if (n < 1 || n > config.maxBatchSize()) {
                        throw BackplaneException.invalid(who(config) + ": input '" + t.name() + "' has batch dimension " + n
                                + "; it must be between 1 and max_batch_size " + config.maxBatchSize());
                    }
                    if (rows == -1) {
                        rows = (int) n;
                        rowsFrom = t.name();
                    } else if (rows != n) {
                        throw BackplaneException.invalid(who(config) + ": input '" + t.name() + "' has batch dimension " + n + " but '"
                                + rowsFrom + "' has " + rows + "; all inputs of a request need the same batch size");
                    }
                }
            }
            Set<String> outputs;
            if (req.requestedOutputs().isEmpty()) {
                outputs = layout.allOutputs;
            } else {
                outputs = new LinkedHashSet<>();
                for (String name : req.requestedOutputs()) {
                    if (!layout.allOutputs.contains(name)) {
                        throw BackplaneException.invalid(who(config) + " asks for output '" + name + "', which the model does not have; its outputs are "
                                + layout.allOutputs);
                    }
                    outputs.add(name);
                }
            }
            return new Item(r, inputs, Math.max(1, rows), new ShapeKey(key), outputs);
        }

        private static String who(ModelConfig config) {
            return "request to model '" + config.name() + "'";
        }

        private static String dims(ModelConfig config, TensorConfig tc) {
            return (config.batches() ? "[batch] + " : "") + (tc.reshape() != null ? tc.reshape() : tc.dims());
        }
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
