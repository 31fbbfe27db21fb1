package io.backplane.backend.cpu;

import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession.SessionOptions;
import ai.onnxruntime.OrtSession.SessionOptions.ExecutionMode;
import ai.onnxruntime.OrtSession.SessionOptions.OptLevel;
import io.backplane.spi.BackplaneException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * ONNX Runtime session options of one model, from the backend options (host-wide defaults) and
 * the model's {@code parameters} (which win). Keys follow Triton's onnxruntime backend where it
 * has one.
 *
 * <p>Defaults do not oversubscribe a small machine: the intra-op pool of each instance gets
 * {@code max(1, min(4, cpus / instances))} threads, the inter-op pool 1 (sequential execution), so
 * that one model with one instance on a 2-core machine uses 2 threads, and 4 instances use 1
 * each. ORT's own default (one thread per physical core for every session) would give every
 * instance of every model a pool as large as the machine.
 *
 * @param intraOpThreads threads that parallelize inside one operator
 * @param interOpThreads threads that run independent operators in parallel (PARALLEL mode only)
 * @param executionMode SEQUENTIAL or PARALLEL
 * @param optimizationLevel graph optimization level
 * @param memoryArena whether the CPU arena allocator is on
 * @param memoryPattern whether memory-pattern planning is on
 * @param configEntries raw {@code session.*} config entries passed to ORT unchanged
 */
record SessionSettings(int intraOpThreads, int interOpThreads, ExecutionMode executionMode, OptLevel optimizationLevel,
        boolean memoryArena, boolean memoryPattern, Map<String, String> configEntries) {

    static final String INTRA_OP = "intra_op_thread_count";
    static final String INTER_OP = "inter_op_thread_count";
    static final String EXECUTION_MODE = "execution_mode";
    static final String OPTIMIZATION = "graph_optimization_level";
    static final String MEM_ARENA = "enable_mem_arena";
    static final String MEM_PATTERN = "enable_mem_pattern";
    static final String CONFIG_PREFIX = "session.";
    static final Set<String> KEYS = Set.of(INTRA_OP, INTER_OP, EXECUTION_MODE, OPTIMIZATION, MEM_ARENA, MEM_PATTERN);
    /** Model parameters the host itself reads (e.g. which batcher to use); not session options. */
    static final Set<String> HOST_KEYS = io.backplane.spi.config.ModelConfig.HOST_PARAMETERS;

    SessionSettings {
        configEntries = Map.copyOf(configEntries);
    }

    /**
     * Merges {@code backendOptions} and {@code modelParameters} (the latter win) over the
     * defaults for a model with {@code instances} instances.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming an unknown key or a bad value
     */
    static SessionSettings from(String model, Map<String, String> backendOptions, Map<String, String> modelParameters, int instances) {
        Map<String, String> merged = new TreeMap<>(backendOptions);
        merged.putAll(modelParameters);
        int cpus = Runtime.getRuntime().availableProcessors();
        int intra = Math.max(1, Math.min(4, cpus / Math.max(1, instances)));
        int inter = 1;
        ExecutionMode mode = ExecutionMode.SEQUENTIAL;
        OptLevel level = OptLevel.ALL_OPT;
        boolean arena = true;
        boolean pattern = true;
        Map<String, String> entries = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : merged.entrySet()) {
            String key = e.getKey();
            String value = e.getValue().trim();
            if (HOST_KEYS.contains(key)) {
                continue;
            }
            switch (key) {
                case INTRA_OP -> intra = threads(model, key, value);
                case INTER_OP -> inter = threads(model, key, value);
                case EXECUTION_MODE -> mode = switch (value.toUpperCase(Locale.ROOT)) {
                    case "0", "SEQUENTIAL" -> ExecutionMode.SEQUENTIAL;
                    case "1", "PARALLEL" -> ExecutionMode.PARALLEL;
                    default -> throw bad(model, key, value, "0/SEQUENTIAL or 1/PARALLEL");
                };
                case OPTIMIZATION -> level = switch (value.toUpperCase(Locale.ROOT)) {
                    case "DISABLE", "NONE", "NO_OPT", "0" -> OptLevel.NO_OPT;
                    case "BASIC", "BASIC_OPT", "1" -> OptLevel.BASIC_OPT;
                    case "EXTENDED", "EXTENDED_OPT", "2" -> OptLevel.EXTENDED_OPT;
                    case "LAYOUT", "LAYOUT_OPT", "3" -> OptLevel.LAYOUT_OPT;
                    case "ALL", "ALL_OPT", "99" -> OptLevel.ALL_OPT;
                    default -> throw bad(model, key, value, "DISABLE, BASIC, EXTENDED, LAYOUT or ALL");
                };
                case MEM_ARENA -> arena = bool(model, key, value);
                case MEM_PATTERN -> pattern = bool(model, key, value);
                default -> {
                    if (key.startsWith(CONFIG_PREFIX)) {
                        entries.put(key, value);
                    } else {
                        throw BackplaneException.invalid("model '" + model + "': parameter '" + key + "' is not known to the cpu (onnxruntime) backend;"
                                + " use one of " + new java.util.TreeSet<>(KEYS)
                                + " or an ONNX Runtime session config key starting with 'session.'");
                    }
                }
            }
        }
        return new SessionSettings(intra, inter, mode, level, arena, pattern, entries);
    }

    /** New ORT session options with these settings; the caller closes them. */
    SessionOptions toOptions() throws OrtException {
        SessionOptions o = new SessionOptions();
        try {
            o.setIntraOpNumThreads(intraOpThreads);
            o.setInterOpNumThreads(interOpThreads);
            o.setExecutionMode(executionMode);
            o.setOptimizationLevel(optimizationLevel);
            o.setCPUArenaAllocator(memoryArena);
            o.setMemoryPatternOptimization(memoryPattern);
            for (Map.Entry<String, String> e : configEntries.entrySet()) {
                o.addConfigEntry(e.getKey(), e.getValue());
            }
            return o;
        } catch (OrtException | RuntimeException e) {
            o.close();
            throw e;
        }
    }

    private static int threads(String model, String key, String value) {
        try {
            int n = Integer.parseInt(value);
            if (n >= 0 && n <= 1024) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw bad(model, key, value, "an integer from 0 (ONNX Runtime decides) to 1024");
    }

    private static boolean bool(String model, String key, String value) {
        return switch (value.toLowerCase(Locale.ROOT)) {
            case "1", "true", "on", "yes" -> true;
            case "0", "false", "off", "no" -> false;
            default -> throw bad(model, key, value, "true or false");
        };
    }

    private static BackplaneException bad(String model, String key, String value, String expected) {
        return BackplaneException.invalid("model '" + model + "': parameter " + key + "='" + value + "' is invalid; use " + expected);
    }
}
