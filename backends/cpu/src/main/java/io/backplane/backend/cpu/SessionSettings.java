package io.backplane.backend.cpu;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtProvider;
import ai.onnxruntime.OrtSession.SessionOptions;
import ai.onnxruntime.OrtSession.SessionOptions.ExecutionMode;
import ai.onnxruntime.OrtSession.SessionOptions.OptLevel;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.Settings;
import io.backplane.spi.config.ConfigNode;
import io.backplane.spi.config.ModelConfig;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 * @param runConfigEntries run options ({@code memory.enable_memory_arena_shrinkage}) set on every run
 * @param accelerators the config's {@code cpu_execution_accelerator} names, each one checked available
 */
record SessionSettings(int intraOpThreads, int interOpThreads, ExecutionMode executionMode, OptLevel optimizationLevel,
        boolean memoryArena, boolean memoryPattern, Map<String, String> configEntries, Map<String, String> runConfigEntries,
        List<String> accelerators) {
    private static final Logger LOG = LoggerFactory.getLogger(SessionSettings.class);

    static final String INTRA_OP = "intra_op_thread_count";
    static final String INTER_OP = "inter_op_thread_count";
    static final String EXECUTION_MODE = "execution_mode";
    static final String OPTIMIZATION = "graph_optimization_level";
    static final String MEM_ARENA = "enable_mem_arena";
    static final String MEM_PATTERN = "enable_mem_pattern";
    static final String ARENA_SHRINKAGE = "memory.enable_memory_arena_shrinkage";
    static final String CONFIG_PREFIX = "session.";
    static final Set<String> KEYS = Set.of(INTRA_OP, INTER_OP, EXECUTION_MODE, OPTIMIZATION, MEM_ARENA, MEM_PATTERN, ARENA_SHRINKAGE);
    /** Triton's cpu_execution_accelerator name for OpenVINO, the one CPU accelerator its onnxruntime backend knows. */
    static final String OPENVINO = "openvino";

    SessionSettings {
        configEntries = Map.copyOf(configEntries);
        runConfigEntries = Map.copyOf(runConfigEntries);
        accelerators = List.copyOf(accelerators);
    }

    /** The same settings with {@code optimization { graph { level } }} and {@code execution_accelerators} read from {@code config}. */
    static SessionSettings from(ModelConfig config, Map<String, String> backendOptions) {
        SessionSettings s = from(config.name(), backendOptions, config.parameters(), config.instanceCount());
        ConfigNode optimization = config.section("optimization").orElse(ConfigNode.EMPTY);
        String model = "model '" + config.name() + "'";
        OptLevel level = s.optimizationLevel();
        var graph = optimization.section("graph");
        if (graph.isPresent() && graph.get().value("level").isPresent()) {
            if (config.parameters().containsKey(OPTIMIZATION)) {
                throw BackplaneException.invalid(model + ": both optimization { graph { level } } and parameter '" + OPTIMIZATION
                        + "' set the graph optimization level; keep one");
            }
            level = tritonGraphLevel(model, graph.get().value("level").get());
        }
        List<String> accelerators = new java.util.ArrayList<>();
        var eas = optimization.section("execution_accelerators");
        if (eas.isPresent()) {
            for (ConfigNode ea : eas.get().sections("cpu_execution_accelerator")) {
                String name = ea.value("name").orElse("");
                if (!name.equals(OPENVINO)) {
                    throw BackplaneException.invalid(model + ": unknown cpu_execution_accelerator '" + name + "'; the onnxruntime backend"
                            + " knows 'openvino' only (as Triton's); remove the entry to run on ONNX Runtime's CPU execution provider");
                }
                if (!OrtEnvironment.getAvailableProviders().contains(OrtProvider.OPEN_VINO)) {
                    throw new BackplaneException(io.backplane.spi.ErrorCode.UNSUPPORTED, model + ": cpu_execution_accelerator 'openvino'"
                            + " is requested but this ONNX Runtime " + Ort.version() + " has no OpenVINO execution provider (available: "
                            + OrtEnvironment.getAvailableProviders() + "; the build from Maven Central has the CPU provider only); remove"
                            + " the entry, or put an ONNX Runtime built with OpenVINO on the backend's class path");
                }
                if (!ea.sections("parameters").isEmpty()) {
                    throw BackplaneException.invalid(model + ": cpu_execution_accelerator 'openvino' parameters are not supported; remove them");
                }
                accelerators.add(name);
            }
            if (!eas.get().sections("gpu_execution_accelerator").isEmpty()) {
                // Triton applies GPU accelerators to KIND_GPU instances only; this backend has none.
                LOG.info("{}: gpu_execution_accelerator entries apply to GPU instances only; the cpu backend runs none, so they are not used",
                        model);
            }
        }
        return new SessionSettings(s.intraOpThreads(), s.interOpThreads(), s.executionMode(), level, s.memoryArena(), s.memoryPattern(),
                s.configEntries(), s.runConfigEntries(), accelerators);
    }

    private static boolean known(String key) {
        return KEYS.contains(key) || key.startsWith(CONFIG_PREFIX);
    }

    /** Whether {@code key} begins as one of this backend's keys does (its first word, e.g. "intra" of intra_op_threads). */
    private static boolean looksLikeOurs(String key) {
        String first = firstWord(key);
        return KEYS.stream().anyMatch(k -> firstWord(k).equals(first));
    }

    private static String firstWord(String key) {
        int cut = key.length();
        for (char c : new char[] {'_', '.'}) {
            int i = key.indexOf(c);
            if (i > 0 && i < cut) {
                cut = i;
            }
        }
        return key.substring(0, cut).toLowerCase(java.util.Locale.ROOT);
    }

    /** Triton's {@code optimization { graph { level } }}: -1 basic, 0 (or absent) all, 1 basic and extended, 2 none. */
    static OptLevel tritonGraphLevel(String model, String value) {
        return switch (value.trim()) {
            case "-1" -> OptLevel.BASIC_OPT;
            case "0" -> OptLevel.ALL_OPT;
            case "1" -> OptLevel.EXTENDED_OPT;
            case "2" -> OptLevel.NO_OPT;
            default -> throw BackplaneException.invalid(model + ": optimization { graph { level: " + value + " } } is not a level;"
                    + " use -1 (basic), 1 (basic and extended), 2 (none) or leave it out (all), as in Triton's onnxruntime backend");
        };
    }

    /**
     * Merges {@code backendOptions} and {@code modelParameters} (the latter win) over the
     * defaults for a model with {@code instances} instances.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming an unknown key or a bad value
     */
    static SessionSettings from(String model, Map<String, String> backendOptions, Map<String, String> modelParameters, int instances) {
        String knownTo = "the cpu (onnxruntime) backend; use one of " + new TreeSet<>(KEYS)
                + " or an ONNX Runtime session config key starting with 'session.'";
        // A backend option (--backend-config) is the operator's, for this backend alone: any unknown key is a mistake.
        Settings.of("cpu backend option", backendOptions, Map.of()).rejectUnknown(SessionSettings::known, knownTo);
        // A model parameter may be meant for someone else (Triton's examples carry execute_delay_ms for other backends, and
        // Triton's onnxruntime backend ignores what it does not read): refused only when it looks like a misspelt key of ours.
        Map<String, String> parameters = new LinkedHashMap<>();
        for (Map.Entry<String, String> p : modelParameters.entrySet()) {
            if (known(p.getKey()) || ModelConfig.HOST_PARAMETERS.contains(p.getKey()) || looksLikeOurs(p.getKey())) {
                parameters.put(p.getKey(), p.getValue());
            } else {
                LOG.warn("model '{}': parameter '{}' is not read by the cpu (onnxruntime) backend and is ignored, as Triton's onnxruntime"
                        + " backend ignores it (it reads {} and 'session.*' keys)", model, p.getKey(), new TreeSet<>(KEYS));
            }
        }
        Settings settings = Settings.of("model '" + model + "'", backendOptions, parameters);
        settings.rejectUnknown(SessionSettings::known, knownTo);
        int cpus = Runtime.getRuntime().availableProcessors();
        int threads = Math.max(1, Math.min(4, cpus / Math.max(1, instances)));
        Map<String, String> entries = new LinkedHashMap<>();
        settings.keys().stream().filter(k -> k.startsWith(CONFIG_PREFIX)).forEach(k -> entries.put(k, settings.string(k, "")));
        Map<String, String> run = new LinkedHashMap<>();
        if (settings.keys().contains(ARENA_SHRINKAGE)) {
            String v = settings.string(ARENA_SHRINKAGE, "");
            // ORT's run option: a ';'-separated list of devices whose arenas shrink after each run, e.g. "cpu:0"
            if (!v.matches("(cpu:0)(;cpu:0)*")) {
                throw BackplaneException.invalid("model '" + model + "': " + ARENA_SHRINKAGE + " '" + v + "' is not a device list the cpu"
                        + " backend has; use \"cpu:0\" (shrink the CPU arena after every run) or leave it out");
            }
            run.put(ARENA_SHRINKAGE, v);
        }
        return new SessionSettings(threads(settings, INTRA_OP, threads), threads(settings, INTER_OP, 1),
                settings.choice(EXECUTION_MODE, ExecutionMode.SEQUENTIAL, Map.of("0", ExecutionMode.SEQUENTIAL, "SEQUENTIAL", ExecutionMode.SEQUENTIAL,
                        "1", ExecutionMode.PARALLEL, "PARALLEL", ExecutionMode.PARALLEL), "0/SEQUENTIAL or 1/PARALLEL"),
                settings.choice(OPTIMIZATION, OptLevel.ALL_OPT, OPT_LEVELS, "DISABLE, BASIC, EXTENDED, LAYOUT or ALL"),
                settings.flag(MEM_ARENA, true), settings.flag(MEM_PATTERN, true), entries, run, List.of());
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
            for (String a : accelerators) {
                if (a.equals(OPENVINO)) {
                    o.addOpenVINO("CPU");
                }
            }
            return o;
        } catch (OrtException | RuntimeException e) {
            o.close();
            throw e;
        }
    }
}
