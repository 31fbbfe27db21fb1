package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * How a model's kernel is launched, read from its {@code config.pbtxt} parameters and checked at
 * load, so that a mistake is a load error naming the parameter, never a fault on the GPU.
 *
 * <pre>
 * parameters { key: "kernel"      value: { string_value: "saxpy" } }
 * parameters { key: "kernel_args" value: { string_value: "count, fp32:2.0, input:X, input:Y, output:OUT" } }
 * parameters { key: "block_size"  value: { string_value: "256" } }          # optional, default 256
 * parameters { key: "module_file" value: { string_value: "saxpy.ptx" } }    # optional
 * </pre>
 *
 * <p>The launch is element-wise: every input and output has the same dims in the config, the
 * batch's tensors are concatenated in device memory, and the 1-D grid is
 * {@code ceil(elements / block_size)} where {@code elements} is the element count of the whole
 * batch. {@code count} passes that element count (int32; {@code count:int64} for 64 bits).
 *
 * @param kernel the entry point's name (for C++ kernels, the mangled name, or use {@code extern "C"})
 * @param args the kernel's arguments in order
 * @param blockSize threads per block
 * @param moduleFile module file in the version folder, empty for the default
 *     ({@code default_model_filename}, else {@code model.ptx}, else {@code model.cubin})
 * @param inputs the inputs in argument order
 * @param outputs the outputs in argument order
 */
record LaunchSpec(String kernel, List<Arg> args, int blockSize, String moduleFile, List<TensorConfig> inputs, List<TensorConfig> outputs) {
    static final String KERNEL = "kernel";
    static final String KERNEL_ARGS = "kernel_args";
    static final String BLOCK_SIZE = "block_size";
    static final String MODULE_FILE = "module_file";
    static final int DEFAULT_BLOCK_SIZE = 256;
    static final int MAX_BLOCK_SIZE = 1024;

    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_$][A-Za-z0-9_$]*");

    /** One kernel argument. */
    sealed interface Arg {
        /** Its size in {@code kernelParams}, bytes. */
        int byteSize();
    }

    /** A device pointer to the batch's data of input {@code name}. */
    record InputArg(String name) implements Arg {
        @Override
        public int byteSize() {
            return 8;
        }
    }

    /** A device pointer to the batch's data of output {@code name}. */
    record OutputArg(String name) implements Arg {
        @Override
        public int byteSize() {
            return 8;
        }
    }

    /** The batch's element count, as int32 or int64. */
    record CountArg(boolean wide) implements Arg {
        @Override
        public int byteSize() {
            return wide ? 8 : 4;
        }
    }

    /** A constant scalar. */
    record ScalarArg(KernelArg value) implements Arg {
        @Override
        public int byteSize() {
            return value.byteSize();
        }
    }

    /**
     * Reads and checks the launch of {@code config}.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the model, the parameter and the bad value
     */
    static LaunchSpec from(ModelConfig config) {
        String model = "model '" + config.name() + "'";
        String kernel = config.parameters().getOrDefault(KERNEL, "").strip();
        if (kernel.isEmpty()) {
            throw BackplaneException.invalid(model + ": the cuda backend needs parameter '" + KERNEL
                    + "' naming the kernel entry point, e.g. parameters { key: \"kernel\" value: { string_value: \"saxpy\" } }");
        }
        if (!IDENTIFIER.matcher(kernel).matches()) {
            throw BackplaneException.invalid(model + ": parameter '" + KERNEL + "' = '" + kernel + "' is not a kernel entry name");
        }
        String argText = config.parameters().getOrDefault(KERNEL_ARGS, "").strip();
        if (argText.isEmpty()) {
            throw BackplaneException.invalid(model + ": the cuda backend needs parameter '" + KERNEL_ARGS
                    + "' listing the kernel's arguments in order, e.g. \"count, fp32:2.0, input:X, input:Y, output:OUT\"");
        }
        int blockSize = parseBlockSize(model, config.parameters().getOrDefault(BLOCK_SIZE, ""));
        String moduleFile = config.parameters().getOrDefault(MODULE_FILE, "").strip();
        if (moduleFile.contains("/") || moduleFile.contains("\\") || moduleFile.equals("..")) {
            throw BackplaneException.invalid(model + ": parameter '" + MODULE_FILE + "' = '" + moduleFile
                    + "' must be a file name in the version folder, without a path");
        }

        List<Arg> args = new ArrayList<>();
        List<TensorConfig> inputs = new ArrayList<>();
        List<TensorConfig> outputs = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        boolean count = false;
        for (String raw : argText.split(",", -1)) {
            String item = raw.strip();
            String where = model + ": " + KERNEL_ARGS + " item '" + item + "'";
            int colon = item.indexOf(':');
            String kind = (colon < 0 ? item : item.substring(0, colon)).strip().toLowerCase(Locale.ROOT);
            String value = colon < 0 ? "" : item.substring(colon + 1).strip();
            switch (kind) {
                case "input", "output" -> {
                    boolean input = kind.equals("input");
                    TensorConfig t = input ? config.input(value) : config.output(value);
                    if (t == null) {
                        throw BackplaneException.invalid(where + " names no declared " + kind + "; declared "
                                + kind + "s: " + (input ? config.inputs() : config.outputs()).stream().map(TensorConfig::name).toList());
                    }
                    if (!seen.add(kind + ":" + value)) {
                        throw BackplaneException.invalid(where + ": " + kind + " '" + value + "' is passed twice");
                    }
                    (input ? inputs : outputs).add(t);
                    args.add(input ? new InputArg(value) : new OutputArg(value));
                }
                case "count" -> {
                    if (count) {
                        throw BackplaneException.invalid(where + ": 'count' is passed twice");
                    }
                    count = true;
                    if (!value.isEmpty() && !value.equals("int32") && !value.equals("int64")) {
                        throw BackplaneException.invalid(where + ": count is 'count', 'count:int32' or 'count:int64'");
                    }
                    args.add(new CountArg(value.equals("int64")));
                }
                case "int32", "int64", "fp32", "fp64" -> args.add(new ScalarArg(scalar(where, kind, value)));
                case "" -> throw BackplaneException.invalid(model + ": " + KERNEL_ARGS + " '" + argText + "' has an empty item");
                default -> throw BackplaneException.invalid(where + ": unknown argument kind '" + kind
                        + "'; use input:NAME, output:NAME, count[:int32|:int64], int32:V, int64:V, fp32:V or fp64:V");
            }
        }
        if (outputs.isEmpty()) {
            throw BackplaneException.invalid(model + ": " + KERNEL_ARGS + " passes no output; the kernel must write at least one");
        }
        checkTensors(config, model, inputs, outputs);
        return new LaunchSpec(kernel, List.copyOf(args), blockSize, moduleFile, List.copyOf(inputs), List.copyOf(outputs));
    }

    /** The kernel argument sizes, in order, to compare with a PTX entry's parameters. */
    List<Integer> argumentSizes() {
        return args.stream().map(Arg::byteSize).toList();
    }

    private static void checkTensors(ModelConfig config, String model, List<TensorConfig> inputs, List<TensorConfig> outputs) {
        for (TensorConfig t : config.inputs()) {
            if (!inputs.contains(t)) {
                throw BackplaneException.invalid(model + ": input '" + t.name() + "' is declared but not passed to the kernel in "
                        + KERNEL_ARGS + "; add input:" + t.name() + " or remove the input");
            }
        }
        for (TensorConfig t : config.outputs()) {
            if (!outputs.contains(t)) {
                throw BackplaneException.invalid(model + ": output '" + t.name() + "' is declared but not passed to the kernel in "
                        + KERNEL_ARGS + "; add output:" + t.name() + " or remove the output");
            }
        }
        List<TensorConfig> all = new ArrayList<>(inputs);
        all.addAll(outputs);
        TensorConfig first = all.getFirst();
        for (TensorConfig t : all) {
            if (t.dataType() == DataType.BYTES) {
                throw BackplaneException.invalid(model + ": tensor '" + t.name() + "' is TYPE_STRING; the cuda backend passes fixed-size types only");
            }
            if (t.reshape() != null) {
                throw BackplaneException.invalid(model + ": tensor '" + t.name() + "' has a reshape, which the cuda backend does not support");
            }
            if (!t.dims().equals(first.dims())) {
                throw BackplaneException.invalid(model + ": tensor '" + t.name() + "' has dims " + t.dims() + " but '" + first.name()
                        + "' has " + first.dims() + "; the cuda backend launches element-wise kernels, so every input and output"
                        + " needs the same dims");
            }
        }
    }

    private static int parseBlockSize(String model, String text) {
        if (text.isBlank()) {
            return DEFAULT_BLOCK_SIZE;
        }
        int v;
        try {
            v = Integer.parseInt(text.strip());
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid(model + ": parameter '" + BLOCK_SIZE + "' = '" + text + "' is not an integer");
        }
        if (v < 1 || v > MAX_BLOCK_SIZE) {
            throw BackplaneException.invalid(model + ": parameter '" + BLOCK_SIZE + "' = " + v + " is out of range; use 1.." + MAX_BLOCK_SIZE
                    + " (a multiple of 32 is best)");
        }
        return v;
    }

    private static KernelArg scalar(String where, String kind, String value) {
        if (value.isEmpty()) {
            throw BackplaneException.invalid(where + ": a " + kind + " scalar needs a value, e.g. " + kind + ":2");
        }
        try {
            return switch (kind) {
                case "int32" -> new KernelArg.Int32(Integer.parseInt(value));
                case "int64" -> new KernelArg.Int64(Long.parseLong(value));
                case "fp32" -> new KernelArg.Float32(Float.parseFloat(value));
                default -> new KernelArg.Float64(Double.parseDouble(value));
            };
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid(where + ": '" + value + "' is not a " + kind + " value");
        }
    }
}
