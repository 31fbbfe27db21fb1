package io.backplane.backend.torch;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;

/**
 * Which config input is which forward() argument, and which element of forward()'s result is which
 * config output, by Triton's PyTorch backend's rules. Inputs: by name when every input is named after
 * a forward() argument; else by {@code <name>__<index>} when every input follows it; else in config
 * order (logged). Outputs: by {@code <name>__<index>} when every output follows it, else in config
 * order. A tensor result is element 0; a tuple or list of tensors gives elements 0, 1, ...
 *
 * @param inputs the config input bound to each forward() argument position, in order
 * @param outputs for each config output (config order), its element of the result
 * @param how how inputs were bound, for the log
 */
record Bindings(List<TensorConfig> inputs, int[] outputs, String how) {
    private static final Pattern INDEXED = Pattern.compile(".*__(\\d+)");

    static Bindings of(String model, ModelConfig config, Optional<List<String>> forwardArgs, Logger log) {
        List<TensorConfig> in = config.inputs();
        TensorConfig[] byPosition = null;
        String how;
        if (forwardArgs.isPresent() && !in.isEmpty() && in.stream().allMatch(t -> forwardArgs.get().contains(t.name()))) {
            byPosition = new TensorConfig[in.size()];
            for (TensorConfig t : in) {
                int pos = forwardArgs.get().indexOf(t.name());
                if (pos >= in.size()) {
                    throw BackplaneException.invalid("model '" + model + "': input '" + t.name() + "' is forward() argument " + pos + " of "
                            + forwardArgs.get() + ", but the config declares only " + in.size() + " inputs; declare every argument before it");
                }
                byPosition[pos] = t;
            }
            how = "forward() argument names " + forwardArgs.get();
        } else if (!in.isEmpty() && in.stream().allMatch(t -> index(t.name()).isPresent())) {
            byPosition = new TensorConfig[in.size()];
            for (TensorConfig t : in) {
                int pos = index(t.name()).getAsInt();
                if (pos >= in.size() || byPosition[pos] != null) {
                    throw BackplaneException.invalid("model '" + model + "': input '" + t.name() + "' names forward() argument " + pos + ", but the "
                            + in.size() + " inputs must be numbered 0 to " + (in.size() - 1) + ", each once (INPUT__0, INPUT__1, ...)");
                }
                byPosition[pos] = t;
            }
            how = "__<index>";
        } else {
            byPosition = in.toArray(TensorConfig[]::new);
            how = "config order";
            if (!in.isEmpty()) {
                log.warn("model '{}': inputs {} follow neither forward()'s argument names {} nor <name>__<index>; they are passed in config order",
                        model, in.stream().map(TensorConfig::name).toList(), forwardArgs.map(Object::toString).orElse("(unknown)"));
            }
        }
        if (forwardArgs.isPresent() && in.size() > forwardArgs.get().size()) {
            throw BackplaneException.invalid("model '" + model + "': the config declares " + in.size() + " inputs but forward() takes "
                    + forwardArgs.get().size() + " " + forwardArgs.get() + "; declare one input per argument");
        }
        List<TensorConfig> out = config.outputs();
        int[] outputs = new int[out.size()];
        if (out.stream().allMatch(t -> index(t.name()).isPresent())) {
            for (int i = 0; i < out.size(); i++) {
                outputs[i] = index(out.get(i).name()).getAsInt();
            }
            long distinct = Arrays.stream(outputs).distinct().count();
            if (distinct != outputs.length) {
                throw BackplaneException.invalid("model '" + model + "': outputs " + out.stream().map(TensorConfig::name).toList()
                        + " name the same result element twice; number them OUTPUT__0, OUTPUT__1, ... once each");
            }
        } else {
            for (int i = 0; i < out.size(); i++) {
                outputs[i] = i;
            }
        }
        return new Bindings(List.of(byPosition), outputs, how);
    }

    static OptionalInt index(String name) {
        Matcher m = INDEXED.matcher(name);
        if (!m.matches()) {
            return OptionalInt.empty();
        }
        try {
            return OptionalInt.of(Integer.parseInt(m.group(1)));
        } catch (NumberFormatException e) {
            return OptionalInt.empty();
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Bindings b && inputs.equals(b.inputs) && Arrays.equals(outputs, b.outputs) && how.equals(b.how);
    }

    @Override
    public int hashCode() {
        return 31 * inputs.hashCode() + Arrays.hashCode(outputs);
    }

    @Override
    public String toString() {
        return "Bindings[" + inputs.stream().map(TensorConfig::name).toList() + " -> " + Arrays.toString(outputs) + ", " + how + "]";
    }

    static List<String> names(List<TensorConfig> ts) {
        return new ArrayList<>(ts.stream().map(TensorConfig::name).toList());
    }
}
