package io.backplane.core.internal;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.EnsembleScheduling.Step;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * An ensemble's graph, checked against its composing models' configs when the ensemble loads.
 * Immutable once built; one per loaded ensemble version, shared by all its requests.
 *
 * <p>Every ensemble tensor has one producer (an ensemble input or one step's output) and any
 * number of consumers (step inputs, ensemble outputs). The checks follow Triton's
 * {@code ValidateEnsembleConfig}: every step names a loaded model, maps only tensors that model
 * declares and every input it requires; a tensor's producer and consumers agree on data type and
 * on shape (-1 matches any size; a model that batches adds the batch dimension); no tensor is
 * produced twice; the steps form no cycle; every ensemble output is produced; every produced
 * tensor is used. Each error names the step (index and model) and the tensor.
 */
final class EnsemblePlan {
    private final String name;
    private final List<Step> steps;
    /** Per step, the indexes of the steps that consume one of its outputs. */
    private final List<List<Integer>> downstream;
    private final boolean decoupled;
    private final List<String> outputs;
    /** Per step: whether its composing model was decoupled when the ensemble loaded. */
    private final boolean[] stepDecoupled;
    private final List<Set<String>> producedInputs;

    private EnsemblePlan(String name, List<Step> steps, List<List<Integer>> downstream, boolean decoupled, List<String> outputs, boolean[] stepDecoupled,
            List<Set<String>> producedInputs) {
        this.producedInputs = producedInputs;
        this.name = name;
        this.steps = steps;
        this.downstream = downstream;
        this.decoupled = decoupled;
        this.outputs = outputs;
        this.stepDecoupled = stepDecoupled;
    }

    String name() {
        return name;
    }

    List<Step> steps() {
        return steps;
    }

    List<Integer> downstream(int step) {
        return downstream.get(step);
    }

    /** The ensemble is decoupled when any step is (Triton's rule). */
    boolean decoupled() {
        return decoupled;
    }

    /** The ensemble tensors that step {@code step} reads from other steps' outputs. */
    Set<String> producedInputs(int step) {
        return producedInputs.get(step);
    }

    boolean stepDecoupled(int step) {
        return stepDecoupled[step];
    }

    /** The ensemble's output names, in config order. */
    List<String> outputs() {
        return outputs;
    }

    /** Where a tensor comes from, for the checks. */
    private record Source(int step, String tensor, TensorConfig config, ModelConfig model) {
        /** "ensemble input 'IN'" or "step 0 (model 'm') output 'OUT'". */
        String describe(List<Step> steps) {
            return step < 0 ? "ensemble input '" + tensor + "'" : steps.get(step).describe() + " output '" + config.name() + "'";
        }
    }

    /**
     * Builds and checks the plan of {@code ensemble}; {@code composing} gives the config of each
     * step's model at its version.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the step and the tensor, or what
     *     {@code composing} threw (an unknown or unloaded model, named with the step)
     */
    static EnsemblePlan of(ModelConfig ensemble, Function<Step, ModelConfig> composing) {
        String en = ensemble.name();
        EnsembleScheduling es = EnsembleScheduling.of(ensemble).orElseThrow(() -> BackplaneException.invalid("model '" + en
                + "' has platform \"ensemble\" but no ensemble_scheduling"));
        List<Step> steps = es.steps();
        List<ModelConfig> models = new ArrayList<>();
        boolean[] stepDecoupled = new boolean[steps.size()];
        boolean decoupled = ensemble.decoupled();
        for (Step s : steps) {
            ModelConfig m;
            try {
                m = Objects.requireNonNull(composing.apply(s), "config");
            } catch (BackplaneException e) {
                throw new BackplaneException(e.code(), "ensemble '" + en + "' " + s.describe() + ": " + e.getMessage(), e.logDetail(), e);
            }
            if (m.section("sequence_batching").isPresent()) {
                throw fail(en, s, "model '" + m.name() + "' is a sequence model (sequence_batching); an ensemble step cannot be a sequence model"
                        + " in Backplane: call it directly with sequence_id / sequence_start / sequence_end");
            }
            if (ensemble.batches() && (!m.batches() || m.maxBatchSize() < ensemble.maxBatchSize())) {
                throw fail(en, s, "the ensemble's max_batch_size is " + ensemble.maxBatchSize() + " but model '" + m.name() + "' has max_batch_size "
                        + m.maxBatchSize() + "; a composing model must take the ensemble's whole batch: lower the ensemble's max_batch_size");
            }
            stepDecoupled[s.index()] = m.decoupled();
            decoupled |= m.decoupled();
            models.add(m);
        }
        Map<String, Source> producers = new LinkedHashMap<>();
        for (TensorConfig in : ensemble.inputs()) {
            producers.put(in.name(), new Source(-1, in.name(), in, ensemble));
        }
        for (Step s : steps) {
            ModelConfig m = models.get(s.index());
            for (Map.Entry<String, String> o : s.outputMap().entrySet()) {
                TensorConfig out = m.output(o.getKey());
                if (out == null) {
                    throw fail(en, s, "output_map names output '" + o.getKey() + "', which model '" + m.name() + "' does not declare; its outputs: "
                            + names(m.outputs()));
                }
                Source previous = producers.putIfAbsent(o.getValue(), new Source(s.index(), o.getValue(), out, m));
                if (previous != null) {
                    throw fail(en, s, "output '" + o.getKey() + "' maps to ensemble tensor '" + o.getValue() + "', which "
                            + previous.describe(steps) + " already produces; each ensemble tensor has one producer");
                }
            }
        }
        Map<String, Integer> uses = new HashMap<>();
        List<List<Integer>> downstream = new ArrayList<>();
        for (int i = 0; i < steps.size(); i++) {
            downstream.add(new ArrayList<>());
        }
        int[] missing = new int[steps.size()];
        for (Step s : steps) {
            ModelConfig m = models.get(s.index());
            for (Map.Entry<String, String> in : s.inputMap().entrySet()) {
                TensorConfig target = m.input(in.getKey());
                if (target == null) {
                    throw fail(en, s, "input_map names input '" + in.getKey() + "', which model '" + m.name() + "' does not declare; its inputs: "
                            + names(m.inputs()));
                }
                Source src = producers.get(in.getValue());
                if (src == null) {
                    throw fail(en, s, "input '" + in.getKey() + "' reads ensemble tensor '" + in.getValue()
                            + "', which is neither an ensemble input nor any step's output; ensemble inputs: " + names(ensemble.inputs()));
                }
                connect(en, s, "input '" + in.getKey() + "' (ensemble tensor '" + in.getValue() + "')", src, steps, target, m);
                uses.merge(in.getValue(), 1, Integer::sum);
                if (src.step() >= 0) {
                    List<Integer> d = downstream.get(src.step());
                    if (!d.contains(s.index())) {
                        d.add(s.index());
                        missing[s.index()]++;
                    }
                }
            }
            for (TensorConfig t : m.inputs()) {
                if (!t.optional() && !s.inputMap().containsKey(t.name())) {
                    throw fail(en, s, "model '" + m.name() + "' requires input '" + t.name() + "' but input_map does not map it;"
                            + " add input_map { key: \"" + t.name() + "\" value: \"<ensemble tensor>\" }");
                }
            }
        }
        for (TensorConfig out : ensemble.outputs()) {
            Source src = producers.get(out.name());
            if (src == null || src.step() < 0) {
                throw BackplaneException.invalid("ensemble '" + en + "': output '" + out.name() + "' is not produced by any step;"
                        + " map a step's output to it with output_map { key: \"<model output>\" value: \"" + out.name() + "\" }");
            }
            connect(en, steps.get(src.step()), "ensemble output '" + out.name() + "'", src, steps, out, ensemble);
            uses.merge(out.name(), 1, Integer::sum);
        }
        for (Source src : producers.values()) {
            if (src.step() >= 0 && !uses.containsKey(src.tensor())) {
                throw fail(en, steps.get(src.step()), "output '" + src.config().name() + "' maps to ensemble tensor '" + src.tensor()
                        + "', which no step reads and which is not an ensemble output; remove it from output_map or use it");
            }
        }
        // Kahn's algorithm: every step must become ready; the ones that never do lie on a cycle.
        ArrayDeque<Integer> ready = new ArrayDeque<>();
        for (int i = 0; i < steps.size(); i++) {
            if (missing[i] == 0) {
                ready.add(i);
            }
        }
        int seen = 0;
        int[] left = missing.clone();
        while (!ready.isEmpty()) {
            int i = ready.poll();
            seen++;
            for (int d : downstream.get(i)) {
                if (--left[d] == 0) {
                    ready.add(d);
                }
            }
        }
        if (seen < steps.size()) {
            List<String> cycle = new ArrayList<>();
            for (int i = 0; i < steps.size(); i++) {
                if (left[i] > 0) {
                    cycle.add(steps.get(i).describe());
                }
            }
            throw BackplaneException.invalid("ensemble '" + en + "': the steps " + cycle + " form a cycle (each waits for another's output);"
                    + " an ensemble must be a directed acyclic graph");
        }
        List<List<Integer>> frozen = downstream.stream().map(List::copyOf).toList();
        List<Set<String>> produced = new ArrayList<>();
        for (Step s : steps) {
            Set<String> p = new java.util.HashSet<>();
            for (String tensor : s.inputMap().values()) {
                if (producers.get(tensor).step() >= 0) {
                    p.add(tensor);
                }
            }
            produced.add(Set.copyOf(p));
        }
        return new EnsemblePlan(en, steps, frozen, decoupled, names(ensemble.outputs()), stepDecoupled, produced);
    }

    /** Checks that {@code src} can feed {@code target} (a step input, or an ensemble output) of {@code consumer}. */
    private static void connect(String en, Step step, String what, Source src, List<Step> steps, TensorConfig target, ModelConfig consumer) {
        if (src.config().dataType() != target.dataType()) {
            throw fail(en, step, what + " is " + target.dataType().configName() + " but " + src.describe(steps) + " is "
                    + src.config().dataType().configName() + "; the data types must match");
        }
        List<Long> from = fullShape(src.model(), src.config());
        List<Long> to = fullShape(consumer, target);
        boolean ok = from.size() == to.size();
        for (int i = 0; ok && i < from.size(); i++) {
            long a = from.get(i);
            long b = to.get(i);
            ok = a == -1 || b == -1 || a == b;
        }
        if (!ok) {
            throw fail(en, step, what + " has shape " + to + " but " + src.describe(steps) + " has shape " + from
                    + " (batch dimension included as -1 where the model batches); the shapes must agree");
        }
    }

    private static List<Long> fullShape(ModelConfig m, TensorConfig t) {
        List<Long> out = new ArrayList<>();
        if (m.batches()) {
            out.add(-1L);
        }
        out.addAll(t.dims());
        return out;
    }

    private static List<String> names(List<TensorConfig> ts) {
        return ts.stream().map(TensorConfig::name).toList();
    }

    private static BackplaneException fail(String ensemble, Step step, String problem) {
        return BackplaneException.invalid("ensemble '" + ensemble + "' " + step.describe() + ": " + problem);
    }
}
