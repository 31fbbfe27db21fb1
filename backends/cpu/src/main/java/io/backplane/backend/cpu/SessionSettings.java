package io.backplane.backend.cpu;

import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession.SessionOptions;
import ai.onnxruntime.OrtSession.SessionOptions.ExecutionMode;
import ai.onnxruntime.OrtSession.SessionOptions.OptLevel;
import io.backplane.spi.Settings;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

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
        Settings settings = Settings.of("model '" + model + "'", backendOptions, modelParameters);
        settings.rejectUnknown(key -> KEYS.contains(key) || key.startsWith(CONFIG_PREFIX), "the cpu (onnxruntime) backend; use one of "
                + new TreeSet<>(KEYS) + " or an ONNX Runtime session config key starting with 'session.'");
        int cpus = Runtime.getRuntime().availableProcessors();
        int threads = Math.max(1, Math.min(4, cpus / Math.max(1, instances)));
        Map<String, String> entries = new LinkedHashMap<>();
        settings.keys().stream().filter(k -> k.startsWith(CONFIG_PREFIX)).forEach(k -> entries.put(k, settings.string(k, "")));
        return new SessionSettings(threads(settings, INTRA_OP, threads), threads(settings, INTER_OP, 1),
                settings.choice(EXECUTION_MODE, ExecutionMode.SEQUENTIAL, Map.of("0", ExecutionMode.SEQUENTIAL, "SEQUENTIAL", ExecutionMode.SEQUENTIAL,
                        "1", ExecutionMode.PARALLEL, "PARALLEL", ExecutionMode.PARALLEL), "0/SEQUENTIAL or 1/PARALLEL"),
                settings.choice(OPTIMIZATION, OptLevel.ALL_OPT, OPT_LEVELS, "DISABLE, BASIC, EXTENDED, LAYOUT or ALL"),
                settings.flag(MEM_ARENA, true), settings.flag(MEM_PATTERN, true), entries);
    }

    private static final Map<String, OptLevel> OPT_LEVELS = Map.ofEntries(Map.entry("DISABLE", OptLevel.NO_OPT), Map.entry("NONE", OptLevel.NO_OPT),
            Map.entry("NO_OPT", OptLevel.NO_OPT), Map.entry("0", OptLevel.NO_OPT), Map.entry("BASIC", OptLevel.BASIC_OPT),
            Map.entry("BASIC_OPT", OptLevel.BASIC_OPT), Map.entry("1", OptLevel.BASIC_OPT), Map.entry("EXTENDED", OptLevel.EXTENDED_OPT),
            Map.entry("EXTENDED_OPT", OptLevel.EXTENDED_OPT), Map.entry("2", OptLevel.EXTENDED_OPT), Map.entry("LAYOUT", OptLevel.LAYOUT_OPT),
            Map.entry("LAYOUT_OPT", OptLevel.LAYOUT_OPT), Map.entry("3", OptLevel.LAYOUT_OPT), Map.entry("ALL", OptLevel.ALL_OPT),
            Map.entry("ALL_OPT", OptLevel.ALL_OPT), Map.entry("99", OptLevel.ALL_OPT));

    /** 0 lets ONNX Runtime decide. */
    private static int threads(Settings settings, String key, int def) {
        return (int) settings.number(key, def, 0, 1024);
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
}
