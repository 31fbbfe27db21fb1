package io.backplane.backend.torch;

import io.backplane.spi.BackplaneException;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;

/**
 * The model parameters Triton's PyTorch backend reads, as they apply to libtorch on the CPU through
 * DJL. Values are Triton's {@code string_value}s.
 *
 * @param optimizedExecution false for {@code DISABLE_OPTIMIZED_EXECUTION: true}: libtorch's graph
 *     executor optimisation off for this model's forward calls (set on the executing thread before each call, as Triton does)
 * @param inferenceMode {@code INFERENCE_MODE} (default true); DJL's forward runs without autograd either way
 * @param intraOpThreads {@code INTRA_OP_THREAD_COUNT}, 0 = libtorch's default
 * @param interOpThreads {@code INTER_OP_THREAD_COUNT}, 0 = libtorch's default
 */
record TorchSettings(boolean optimizedExecution, boolean inferenceMode, int intraOpThreads, int interOpThreads) {
    /** Triton parameters for GPUs or for libtorch switches DJL does not expose: accepted, logged, ignored. */
    static final Set<String> IGNORED = Set.of("ENABLE_NVFUSER", "ENABLE_TENSOR_FUSER", "ENABLE_CACHE_CLEANING", "ENABLE_WEIGHT_SHARING",
            "ENABLE_JIT_EXECUTOR", "ENABLE_JIT_PROFILING", "ENABLE_CUDA_GRAPH", "ENABLE_CUDNN_BENCHMARK");

    static TorchSettings of(String model, Map<String, String> parameters, Logger log) {
        boolean disable = bool(model, parameters, "DISABLE_OPTIMIZED_EXECUTION", false);
        boolean inference = bool(model, parameters, "INFERENCE_MODE", true);
        int intra = count(model, parameters, "INTRA_OP_THREAD_COUNT");
        int inter = count(model, parameters, "INTER_OP_THREAD_COUNT");
        for (String key : parameters.keySet()) {
            if (IGNORED.contains(key)) {
                log.info("model '{}': parameter {} = {} is ignored: {}", model, key, parameters.get(key),
                        key.startsWith("ENABLE_JIT") ? "DJL's PyTorch engine exposes no switch for libtorch's JIT executor or profiling mode"
                                : "it applies to GPUs, and this backend runs on the CPU");
            }
        }
        return new TorchSettings(!disable, inference, intra, inter);
    }

    private static boolean bool(String model, Map<String, String> p, String key, boolean dflt) {
        String v = p.get(key);
        if (v == null) {
            return dflt;
        }
        return switch (v.strip().toLowerCase(Locale.ROOT)) {
            case "true", "1", "yes", "on" -> true;
            case "false", "0", "no", "off" -> false;
            default -> throw BackplaneException.invalid("model '" + model + "': parameter " + key + " is '" + v + "'; use \"true\" or \"false\"");
        };
    }

    private static int count(String model, Map<String, String> p, String key) {
        String v = p.get(key);
        if (v == null) {
            return 0;
        }
        try {
            int n = Integer.parseInt(v.strip());
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw BackplaneException.invalid("model '" + model + "': parameter " + key + " is '" + v + "'; use a thread count ≥ 1 (0 = libtorch's default)");
    }
}
