package io.backplane.spi.engine;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.MemoryType;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A model's inputs and outputs, precomputed once per instance from its config: checks the requests
 * of a batch against it and groups those that can run as one engine call.
 *
 * <p>A request is refused (ended with INVALID_ARGUMENT naming the bad value) when it has an input
 * the model lacks, lacks a required input, has an input of another data type, another rank or
 * another size in a fixed dimension (the config's {@code reshape} when it has one, else its
 * {@code dims}), a batch dimension outside 1..{@code max_batch_size}, inputs of different batch
 * sizes, an input in GPU memory, or asks for an output the model lacks. Requests already cancelled
 * end with CANCELLED; requests already ended are skipped.
 *
 * <p>When the model batches ({@code max_batch_size > 0}) requests whose inputs agree in every
 * dimension but the first run together; otherwise each request is its own group. Thread-safe and
 * immutable: one layout serves every {@code execute} of an instance.
 */
public final class BatchLayout {
    private final ModelConfig config;
    private final Map<String, Integer> inputIndex = new HashMap<>();
    private final long[][] dims;
    private final Set<String> allOutputs;

    private BatchLayout(ModelConfig config) {
        this.config = config;
        dims = new long[config.inputs().size()][];
        for (int k = 0; k < dims.length; k++) {
            TensorConfig tc = config.inputs().get(k);
            inputIndex.put(tc.name(), k);
            dims[k] = tc.modelDims().stream().mapToLong(Long::longValue).toArray();
        }
        Set<String> all = new LinkedHashSet<>();
        config.outputs().forEach(o -> all.add(o.name()));
        allOutputs = Collections.unmodifiableSet(all);
    }

    /** The layout of {@code config}'s inputs and outputs. */
    public static BatchLayout of(ModelConfig config) {
        return new BatchLayout(config);
    }

    /** The config this layout was made from. */
    public ModelConfig config() {
        return config;
    }

    /**
     * Checks every request and groups the ones that can run: ends cancelled and refused requests
     * itself (with FINAL), skips ended ones.
     *
     * @return the groups, in the order of their first request; empty when no request is left
     */
    public List<RowBatch> group(List<ScheduledRequest> batch) {
        Map<Object, List<RowBatch.Member>> groups = new LinkedHashMap<>();
        for (ScheduledRequest r : batch) {
            if (r.sender().isClosed()) {
                continue;
            }
            if (r.isCancelled()) {
                end(r, new BackplaneException(ErrorCode.CANCELLED, "request " + r.id() + " to model '" + config.name()
                        + "' was cancelled before it ran"));
                continue;
            }
            RowBatch.Member member;
            try {
                member = check(r);
            } catch (BackplaneException e) {
                end(r, e);
                continue;
            }
            Object key = config.batches() ? member.key() : member;
            groups.computeIfAbsent(key, k -> new ArrayList<>()).add(member);
        }
        List<RowBatch> out = new ArrayList<>(groups.size());
        for (List<RowBatch.Member> members : groups.values()) {
            out.add(new RowBatch(this, members));
        }
        return out;
    }

    /**
     * {@link #group} the batch, then runs each group through {@code engine} and answers its requests.
     * When the engine throws for a group of several requests, each runs again alone, so that only the
     * request at fault fails; a {@link BackplaneException} keeps its code, anything else ends the
     * request with INTERNAL naming the model and the engine's message. Never throws for a request's
     * fault: every request of the batch has ended when it returns, except where an {@link Error}
     * escapes, or a sender throws something else than the {@link IllegalStateException} of a request
     * the core already ended (the core's senders never do).
     */
    public void execute(List<ScheduledRequest> batch, Engine engine) {
        for (RowBatch group : group(batch)) {
            run(group, engine);
        }
    }

    private void run(RowBatch group, Engine engine) {
        Exception failure;
        try {
            group.answer(engine.run(group));
            return;
        } catch (Exception e) { // the engine's failure, whatever its type, is the group's
            failure = e;
        }
        if (group.size() > 1) {
            for (RowBatch alone : group.each()) {
                run(alone, engine);
            }
            return;
        }
        BackplaneException error = failure instanceof BackplaneException be ? be
                : new BackplaneException(ErrorCode.INTERNAL, "model '" + config.name() + "': the engine failed: " + failure, failure);
        group.fail(error);
    }

    int index(String input) {
        Integer k = inputIndex.get(input);
        if (k == null) {
            throw new IllegalArgumentException("model '" + config.name() + "' has no input '" + input + "'; its inputs are "
                    + config.inputs().stream().map(TensorConfig::name).toList());
        }
        return k;
    }

    Set<String> allOutputs() {
        return allOutputs;
    }

    static void end(ScheduledRequest r, BackplaneException error) {
        send(r, InferenceResponse.error(error));
    }

    static void send(ScheduledRequest r, InferenceResponse response) {
        if (r.sender().isClosed()) {
            return;
        }
        try {
            r.sender().send(response, ResponseSender.FINAL);
        } catch (IllegalStateException e) {
            // the core ended the request meanwhile (timeout, cancel, unload): it has its answer
        }
    }

    private RowBatch.Member check(ScheduledRequest r) {
        InferenceRequest req = r.request();
        Tensor[] inputs = new Tensor[dims.length];
        int batchDims = config.batches() ? 1 : 0;
        int keyLength = 0;
        for (Tensor t : req.inputs()) {
            Integer k = inputIndex.get(t.name());
            if (k == null) {
                throw BackplaneException.invalid(who() + " has input '" + t.name() + "', which the model does not have; its inputs are "
                        + config.inputs().stream().map(TensorConfig::name).toList());
            }
            inputs[k] = t;
            keyLength += Math.max(0, t.rank() - batchDims);
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
                    throw BackplaneException.invalid(who() + " lacks input '" + tc.name() + "' (" + tc.dataType().protocolName() + ", dims "
                            + dims(tc) + ")");
                }
                key[at++] = -2;
                continue;
            }
            if (t.memoryType() == MemoryType.GPU) {
                throw BackplaneException.invalid(who() + ": input '" + t.name() + "' is in GPU memory; this backend reads host memory: send it"
                        + " in CPU memory");
            }
            if (t.dataType() != tc.dataType()) {
                throw BackplaneException.invalid(who() + ": input '" + t.name() + "' is " + t.dataType().protocolName()
                        + " but the model expects " + tc.dataType().protocolName());
            }
            long[] want = dims[k];
            if (t.rank() != want.length + batchDims) {
                throw BackplaneException.invalid(who() + ": input '" + t.name() + "' has shape " + Arrays.toString(t.shape())
                        + " but the model expects " + dims(tc) + " (rank " + (want.length + batchDims) + ")");
            }
            for (int d = 0; d < want.length; d++) {
                long got = t.dim(d + batchDims);
                if (want[d] != -1 && got != want[d]) {
                    throw BackplaneException.invalid(who() + ": input '" + t.name() + "' has shape " + Arrays.toString(t.shape())
                            + " but the model expects " + dims(tc));
                }
                key[at++] = got;
            }
            key[at++] = -1; // separator
            if (batchDims == 1) {
                long n = t.dim(0);
                if (n < 1 || n > config.maxBatchSize()) {
                    throw BackplaneException.invalid(who() + ": input '" + t.name() + "' has batch dimension " + n
                            + "; it must be between 1 and max_batch_size " + config.maxBatchSize());
                }
                if (rows == -1) {
                    rows = (int) n;
                    rowsFrom = t.name();
                } else if (rows != n) {
                    throw BackplaneException.invalid(who() + ": input '" + t.name() + "' has batch dimension " + n + " but '" + rowsFrom
                            + "' has " + rows + "; all inputs of a request need the same batch size");
                }
            }
        }
        Set<String> outputs;
        if (req.requestedOutputs().isEmpty()) {
            outputs = allOutputs;
        } else {
            outputs = new LinkedHashSet<>();
            for (String name : req.requestedOutputs()) {
                if (!allOutputs.contains(name)) {
                    throw BackplaneException.invalid(who() + " asks for output '" + name + "', which the model does not have; its outputs are "
                            + allOutputs);
                }
                outputs.add(name);
            }
        }
        return new RowBatch.Member(r, inputs, Math.max(1, rows), new RowBatch.ShapeKey(key), outputs);
    }

    private String who() {
        return "request to model '" + config.name() + "'";
    }

    private String dims(TensorConfig tc) {
        return (config.batches() ? "[batch] + " : "") + tc.modelDims();
    }
}
