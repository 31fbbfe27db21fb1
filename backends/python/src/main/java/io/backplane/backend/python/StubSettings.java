package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.Settings;
import java.util.Map;

/**
 * The knobs of one model's stubs: a backend option (host level) overridden by a model config
 * parameter of the same key.
 */
record StubSettings(String interpreter, long shmInitialBytes, long shmMaxBytes, long startupTimeoutMillis,
        long executeTimeoutMillis, long heartbeatIntervalMillis, long heartbeatTimeoutMillis, long stallKillMillis,
        long finalizeTimeoutMillis, long restartBackoffInitialMillis, long restartBackoffMaxMillis, long spinMicros, long readinessTimeoutMillis, boolean forkStubs) {

    static final String INTERPRETER = "python_interpreter";
    static final String SHM_INITIAL = "shm_initial_bytes";
    static final String SHM_MAX = "shm_max_bytes";
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
    static final java.util.Set<String> KEYS = java.util.Set.of(INTERPRETER, SHM_INITIAL, SHM_MAX, STARTUP_TIMEOUT, EXECUTE_TIMEOUT,
            HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, STALL_KILL, FINALIZE_TIMEOUT, RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX, SPIN, READINESS_TIMEOUT, FORK);

    /** Refuses a backend option this backend does not read (a typo, or another server's name for it). */
    static void checkBackendOptions(Map<String, String> backendOptions) {
        for (String key : backendOptions.keySet()) {
            if (!KEYS.contains(key)) {
                String hint = switch (key) {
                    case "shm-default-byte-size" -> " (Triton's name; here it is " + SHM_INITIAL + ")";
                    case "shm-growth-byte-size" -> " (Triton's name; here the region grows on demand up to " + SHM_MAX + ")";
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
        return new StubSettings(path, shmInitialBytes, shmMaxBytes, startupTimeoutMillis, executeTimeoutMillis, heartbeatIntervalMillis,
                heartbeatTimeoutMillis, stallKillMillis, finalizeTimeoutMillis, restartBackoffInitialMillis, restartBackoffMaxMillis, spinMicros, readinessTimeoutMillis, forkStubs);
    }

    static StubSettings resolve(Map<String, String> backendOptions, Map<String, String> modelParameters) {
        Settings l = Settings.of("python backend", backendOptions, modelParameters);
        StubSettings s = new StubSettings(l.string(INTERPRETER, "python3"), number(l, SHM_INITIAL, 4L << 20),
                number(l, SHM_MAX, 1L << 30), number(l, STARTUP_TIMEOUT, 60_000), number(l, EXECUTE_TIMEOUT, 0),
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
