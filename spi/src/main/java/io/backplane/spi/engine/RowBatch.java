package io.backplane.spi.engine;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Requests of one batch whose inputs agree in every dimension but the batch dimension, checked
 * against the model's config by {@link BatchLayout#group}: what one engine call runs.
 *
 * <p>{@link #stack} lays an input's rows of every request end to end, in request order, and
 * {@link #answer} cuts each output back into one slice per request (request {@code i} gets rows
 * {@code rows(0) + ... + rows(i-1)} up to its own), so an engine sees one batch of
 * {@link #rows()} rows. When the model does not batch, a group holds one request and its tensors
 * are passed as they are.
 *
 * <p>Used by the thread that runs the batch; not thread-safe.
 */
public final class RowBatch {
    private final BatchLayout layout;
    private final List<Member> members;
    private final int rows;

    RowBatch(BatchLayout layout, List<Member> members) {
        this.layout = layout;
        this.members = List.copyOf(members);
        int n = 0;
        for (Member m : members) {
            n += m.rows;
        }
        this.rows = n;
    }

    /** The model's config. */
    public ModelConfig config() {
        return layout.config();
    }

    /** The number of requests. */
    public int size() {
        return members.size();
    }

    /** The rows of all requests together: the engine call's batch size (1 per request when the model does not batch). */
    public int rows() {
        return rows;
    }

    /** The rows of request {@code i}: its batch dimension, or 1 when the model does not batch. */
    public int rows(int i) {
        return members.get(i).rows;
    }

    /** Request {@code i}, in the order the batch gave them. */
    public ScheduledRequest request(int i) {
        return members.get(i).request;
    }

    /** Whether this group's requests carry {@code input} (an optional input may be absent from all of them; never from some). */
    public boolean has(String input) {
        return members.getFirst().inputs[layout.index(input)] != null;
    }

    /** Request {@code i}'s tensor for {@code input}, or null when the request omits that optional input. */
    public @Nullable Tensor input(int i, String input) {
        return members.get(i).inputs[layout.index(input)];
    }

    /** The input's data type, from the config. */
    public DataType dataType(String input) {
        return layout.config().inputs().get(layout.index(input)).dataType();
    }

    /**
     * The shape of the stacked input: the requests' common shape with {@link #rows()} as first
     * dimension when the model batches; the request's own shape when it does not.
     *
     * @throws IllegalArgumentException when the model has no such input, or the group does not carry it
     */
    public long[] shape(String input) {
        long[] s = present(input).shape();
        if (layout.config().batches()) {
            s[0] = rows;
        }
        return s;
    }

    /**
     * The input's rows of every request, end to end in request order: {@code rows() * rowBytes}
     * bytes, little-endian, always in native memory aligned to the element size, so its
     * {@link MemorySegment#address()} can be handed to an engine. For a single request whose tensor
     * already is such memory, that memory itself (no copy; the engine must only read it, and only
     * during this {@code execute}); otherwise a copy in {@code arena}, aligned to 64 bytes.
     *
     * @throws IllegalArgumentException for a BYTES input (see {@link #stackBytes}), or an input the group lacks
     */
    public MemorySegment stack(String input, Arena arena) {
        Tensor first = present(input);
        if (first.dataType() == DataType.BYTES) {
            throw new IllegalArgumentException("input '" + input + "' is BYTES: its elements have no fixed size; use stackBytes");
        }
        int k = layout.index(input);
        MemorySegment own = first.data();
        if (members.size() == 1 && own.isNative() && own.address() % first.dataType().byteSize() == 0) {
            return own;
        }
        long total = 0;
        for (Member m : members) {
            total += m.inputs[k].byteSize();
        }
        MemorySegment all = arena.allocate(total, 64);
        long offset = 0;
        for (Member m : members) {
            MemorySegment data = m.inputs[k].data();
            MemorySegment.copy(data, 0, all, offset, data.byteSize());
            offset += data.byteSize();
        }
        return all;
    }

    /** A BYTES input's elements of every request, in request order, row-major within each. */
    public List<byte[]> stackBytes(String input) {
        Tensor first = present(input);
        if (first.dataType() != DataType.BYTES) {
            throw new IllegalArgumentException("input '" + input + "' is " + first.dataType().protocolName() + ", not BYTES; use stack");
        }
        int k = layout.index(input);
        List<byte[]> out = new ArrayList<>();
        for (Member m : members) {
            out.addAll(m.inputs[k].toBytesList());
        }
        return out;
    }

    /** The outputs any request of the group asked for, in config order (all of them where a request named none). */
    public Set<String> outputs() {
        Set<String> wanted = new LinkedHashSet<>();
        for (Member m : members) {
            wanted.addAll(m.outputs);
        }
        Set<String> ordered = new LinkedHashSet<>();
        for (String name : layout.allOutputs()) {
            if (wanted.contains(name)) {
                ordered.add(name);
            }
        }
        return Collections.unmodifiableSet(ordered);
    }

    /**
     * Answers every request of the group from the engine's outputs: each output is cut into one
     * slice per request by rows (slices of its memory, no copy; BYTES by element), named and typed as
     * the config says, and each request is sent the outputs it asked for, with FINAL.
     *
     * @throws BackplaneException INTERNAL (no request answered) when an output any request asked for
     *     is missing, has another data type than the config, or (batching) does not have {@link #rows()}
     *     as first dimension
     */
    public void answer(Map<String, Tensor> outputs) {
        Set<String> wanted = outputs();
        List<List<Tensor>> answers = new ArrayList<>(members.size());
        for (int i = 0; i < members.size(); i++) {
            answers.add(new ArrayList<>());
        }
        for (TensorConfig out : layout.config().outputs()) {
            if (!wanted.contains(out.name())) {
                continue;
            }
            Tensor t = outputs.get(out.name());
            if (t == null) {
                throw BackplaneException.internal(where() + ": the engine returned no output '" + out.name() + "'; it returned "
                        + outputs.keySet());
            }
            List<Tensor> parts = split(out, t);
            for (int i = 0; i < members.size(); i++) {
                if (members.get(i).outputs.contains(out.name())) {
                    answers.get(i).add(parts.get(i));
                }
            }
        }
        for (int i = 0; i < members.size(); i++) {
            BatchLayout.send(members.get(i).request, InferenceResponse.of(answers.get(i)));
        }
    }

    /** Ends every request of the group with {@code error}. */
    public void fail(BackplaneException error) {
        for (Member m : members) {
            BatchLayout.end(m.request, error);
        }
    }

    /** One group per request: how {@link BatchLayout#execute} isolates a failing batch. */
    List<RowBatch> each() {
        List<RowBatch> out = new ArrayList<>(members.size());
        for (Member m : members) {
            out.add(new RowBatch(layout, List.of(m)));
        }
        return out;
    }

    private List<Tensor> split(TensorConfig out, Tensor t) {
        if (t.dataType() != out.dataType()) {
            throw BackplaneException.internal(where() + ": the engine returned output '" + out.name() + "' as " + t.dataType().protocolName()
                    + " but the config says " + out.dataType().protocolName());
        }
        boolean batches = layout.config().batches();
        long[] shape = t.shape();
        if (batches && (shape.length == 0 || shape[0] != rows)) {
            throw BackplaneException.internal(where() + ": output '" + out.name() + "' has shape " + Arrays.toString(shape) + " but the batch has "
                    + rows + " rows; a batching model's outputs keep the batch as their first dimension");
        }
        List<Tensor> parts = new ArrayList<>(members.size());
        if (!batches) {
            parts.add(t.name().equals(out.name()) ? t : t.withName(out.name()));
            return parts;
        }
        long perRow = rows == 0 ? 0 : t.elementCount() / rows;
        if (t.dataType() == DataType.BYTES) {
            List<byte[]> elements = t.toBytesList();
            int offset = 0;
            for (Member m : members) {
                int n = Math.toIntExact(perRow * m.rows);
                parts.add(Tensor.ofBytes(out.name(), rowShape(shape, m.rows), elements.subList(offset, offset + n)));
                offset += n;
            }
            return parts;
        }
        MemorySegment all = t.data();
        long rowBytes = perRow * t.dataType().byteSize();
        long offset = 0;
        for (Member m : members) {
            long size = rowBytes * m.rows;
            parts.add(Tensor.of(out.name(), t.dataType(), rowShape(shape, m.rows), all.asSlice(offset, size)));
            offset += size;
        }
        return parts;
    }

    private static long[] rowShape(long[] batchShape, int rows) {
        long[] s = batchShape.clone();
        s[0] = rows;
        return s;
    }

    private Tensor present(String input) {
        Tensor t = members.getFirst().inputs[layout.index(input)];
        if (t == null) {
            throw new IllegalArgumentException("this group's requests do not carry optional input '" + input + "'; check has(\"" + input + "\") first");
        }
        return t;
    }

    private String where() {
        return "model '" + layout.config().name() + "'";
    }

    /** A request checked against the config: its inputs in config order, its rows, its grouping key and the outputs it asked for. */
    record Member(ScheduledRequest request, @Nullable Tensor[] inputs, int rows, ShapeKey key, Set<String> outputs) {
    }

    /** The grouping key of a request: the non-batch dimensions of each input in config order, -1 between inputs, -2 for an absent optional input. */
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
}
