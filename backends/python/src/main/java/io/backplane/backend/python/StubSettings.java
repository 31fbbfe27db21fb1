package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.Settings;
import java.util.Map;

/**
 * The knobs of one model's stubs: a backend option (host level) overridden by a model config
 * parameter of the same key.
 */
record StubSettings(String interpreter, long shmInitialBytes, long shmMaxBytes, long shmGrowthBytes, long startupTimeoutMillis,
        long executeTimeoutMillis, long heartbeatIntervalMillis, long heartbeatTimeoutMillis, long stallKillMillis,
        long finalizeTimeoutMillis, long restartBackoffInitialMillis, long restartBackoffMaxMillis, long spinMicros, long readinessTimeoutMillis, boolean forkStubs) {

    static final String INTERPRETER = "python_interpreter";
    static final String SHM_INITIAL = "shm_initial_bytes";
    static final String SHM_MAX = "shm_max_bytes";
    /** Bytes a host region grows by, at least (rounded up to fit the request); 0 (the default): double the last chunk. */
    static final String SHM_GROWTH = "shm_growth_bytes";
    /** Triton's backend option for {@link #SHM_INITIAL} (same meaning; at least 1 MiB, as Triton checks). */
    static final String TRITON_SHM_DEFAULT = "shm-default-byte-size";
    /** Triton's backend option for {@link #SHM_GROWTH} (same meaning; more than zero, as Triton checks). */
    static final String TRITON_SHM_GROWTH = "shm-growth-byte-size";
    static final String STARTUP_TIMEOUT = "startup_timeout_ms";
    static final String EXECUTE_TIMEOUT = "execute_timeout_ms";
    static final String HEARTBEAT_INTERVAL = "heartbeat_interval_ms";
    static final String HEARTBEAT_TIMEOUT = "heartbeat_timeout_ms";
    static final String STALL_KILL = "stall_kill_timeout_ms";
    static final String FINALIZE_TIMEOUT = "finalize_timeout_ms";
    /**
     * The wait before the first restart after a stub's death, unless a request for the instance
     * comes first (then at once); long enough that a readiness probe sees the outage.
     */
    static final String RESTART_BACKOFF_INITIAL = "restart_backoff_initial_ms";
    static final String RESTART_BACKOFF_MAX = "restart_backoff_max_ms";
    static final String SPIN = "spin_us";
    /** How long a readiness query waits for the model's is_ready() (Triton: 5 s, fixed). */
    static final String READINESS_TIMEOUT = "readiness_timeout_ms";
    /** Whether stubs are forks of a warm template ({@link StubLauncher}); {@code false} spawns each one. */
    static final String FORK = "fork_stubs";

    /** Every key this backend reads, as a backend option or a model parameter. */
    static final java.util.Set<String> KEYS = java.util.Set.of(INTERPRETER, SHM_INITIAL, SHM_MAX, SHM_GROWTH, TRITON_SHM_DEFAULT,
            TRITON_SHM_GROWTH, STARTUP_TIMEOUT, EXECUTE_TIMEOUT, HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, STALL_KILL, FINALIZE_TIMEOUT,
            RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX, SPIN, READINESS_TIMEOUT, FORK);

    /** Refuses a backend option this backend does not read (a typo, or another server's name for it). */
    static void checkBackendOptions(Map<String, String> backendOptions) {
        for (String key : backendOptions.keySet()) {
            if (!KEYS.contains(key)) {
                String hint = switch (key) {
                    case "stub-timeout-seconds" -> " (Triton's name; here it is " + STARTUP_TIMEOUT + ", in milliseconds)";
                    default -> "";
                };
                throw BackplaneException.invalid("python backend: unknown backend option '" + key + "'" + hint + "; known options: "
                        + new java.util.TreeSet<>(KEYS));
            }
        }
    }

    /** These settings with another interpreter (an execution environment's). */
    StubSettings withInterpreter(String path) {
        return new StubSettings(path, shmInitialBytes, shmMaxBytes, shmGrowthBytes, startupTimeoutMillis, executeTimeoutMillis, heartbeatIntervalMillis,
                heartbeatTimeoutMillis, stallKillMillis, finalizeTimeoutMillis, restartBackoffInitialMillis, restartBackoffMaxMillis, spinMicros,
                readinessTimeoutMillis, forkStubs);
    }

    static StubSettings resolve(Map<String, String> backendOptions, Map<String, String> modelParameters) {
        Settings l = Settings.of("python backend", backendOptions, modelParameters);
        long initial = 4L << 20;
        long growth = 0;
        // Triton's names (backend options or model parameters): the defaults of Backplane's own, which win when both are given.
        if (l.asMap().containsKey(TRITON_SHM_DEFAULT)) {
            initial = l.number(TRITON_SHM_DEFAULT, initial, 0, Long.MAX_VALUE);
            if (initial < 1L << 20) {
                throw BackplaneException.invalid("python backend: " + TRITON_SHM_DEFAULT + " can't be smaller than 1 MiB (1048576 bytes), got "
                        + initial);
            }
        }
        if (l.asMap().containsKey(TRITON_SHM_GROWTH)) {
            growth = l.number(TRITON_SHM_GROWTH, 1, Long.MIN_VALUE, Long.MAX_VALUE);
            if (growth <= 0) {
                throw BackplaneException.invalid("python backend: " + TRITON_SHM_GROWTH + " can't be smaller than or equal to zero. (got " + growth
                        + ")");
            }
        }
        StubSettings s = new StubSettings(l.string(INTERPRETER, "python3"), number(l, SHM_INITIAL, initial),
                number(l, SHM_MAX, 1L << 30), number(l, SHM_GROWTH, growth), number(l, STARTUP_TIMEOUT, 60_000), number(l, EXECUTE_TIMEOUT, 0),
                number(l, HEARTBEAT_INTERVAL, 500), number(l, HEARTBEAT_TIMEOUT, 5_000), number(l, STALL_KILL, 10_000),
                number(l, FINALIZE_TIMEOUT, 10_000), number(l, RESTART_BACKOFF_INITIAL, 2_500), number(l, RESTART_BACKOFF_MAX, 5_000), number(l, SPIN, 200),
                number(l, READINESS_TIMEOUT, StubReadiness.TIMEOUT_MILLIS), l.flag(FORK, true));
        if (s.shmInitialBytes < 65536 || s.shmMaxBytes < s.shmInitialBytes) {
            throw BackplaneException.invalid("python backend: " + SHM_INITIAL + " (" + s.shmInitialBytes + ") must be ≥ 65536 and ≤ "
                    + SHM_MAX + " (" + s.shmMaxBytes + ")");
        }
        if (s.heartbeatIntervalMillis < 1 || s.heartbeatTimeoutMillis < s.heartbeatIntervalMillis) {
            throw BackplaneException.invalid("python backend: " + HEARTBEAT_TIMEOUT + " (" + s.heartbeatTimeoutMillis + ") must be ≥ "
                    + HEARTBEAT_INTERVAL + " (" + s.heartbeatIntervalMillis + ") ≥ 1");
        }
        return s;
    }

    private static long number(Settings settings, String key, long def) {
        return settings.number(key, def, 0, Long.MAX_VALUE);
    }
}
