package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import java.util.Map;

/**
 * The knobs of one model's stubs: a backend option (host level) overridden by a model config
 * parameter of the same key.
 */
record StubSettings(String interpreter, long shmInitialBytes, long shmMaxBytes, long startupTimeoutMillis,
        long executeTimeoutMillis, long heartbeatIntervalMillis, long heartbeatTimeoutMillis, long stallKillMillis,
        long finalizeTimeoutMillis, long restartBackoffMaxMillis, long spinMicros) {

    static final String INTERPRETER = "python_interpreter";
    static final String SHM_INITIAL = "shm_initial_bytes";
    static final String SHM_MAX = "shm_max_bytes";
    static final String STARTUP_TIMEOUT = "startup_timeout_ms";
    static final String EXECUTE_TIMEOUT = "execute_timeout_ms";
    static final String HEARTBEAT_INTERVAL = "heartbeat_interval_ms";
    static final String HEARTBEAT_TIMEOUT = "heartbeat_timeout_ms";
    static final String STALL_KILL = "stall_kill_timeout_ms";
    static final String FINALIZE_TIMEOUT = "finalize_timeout_ms";
    static final String RESTART_BACKOFF_MAX = "restart_backoff_max_ms";
    static final String SPIN = "spin_us";

    /** These settings with another interpreter (an execution environment's). */
    StubSettings withInterpreter(String path) {
        return new StubSettings(path, shmInitialBytes, shmMaxBytes, startupTimeoutMillis, executeTimeoutMillis, heartbeatIntervalMillis,
                heartbeatTimeoutMillis, stallKillMillis, finalizeTimeoutMillis, restartBackoffMaxMillis, spinMicros);
    }

    static StubSettings resolve(Map<String, String> backendOptions, Map<String, String> modelParameters) {
        Lookup l = new Lookup(backendOptions, modelParameters);
        StubSettings s = new StubSettings(l.string(INTERPRETER, "python3"), l.number(SHM_INITIAL, 4L << 20),
                l.number(SHM_MAX, 1L << 30), l.number(STARTUP_TIMEOUT, 60_000), l.number(EXECUTE_TIMEOUT, 0),
                l.number(HEARTBEAT_INTERVAL, 500), l.number(HEARTBEAT_TIMEOUT, 5_000), l.number(STALL_KILL, 10_000),
                l.number(FINALIZE_TIMEOUT, 10_000), l.number(RESTART_BACKOFF_MAX, 5_000), l.number(SPIN, 200));
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

    private record Lookup(Map<String, String> options, Map<String, String> params) {
        String string(String key, String def) {
            String v = params.get(key);
            if (v == null) {
                v = options.get(key);
            }
            return v == null || v.isBlank() ? def : v.strip();
        }

        long number(String key, long def) {
            String v = string(key, "");
            if (v.isEmpty()) {
                return def;
            }
            try {
                long n = Long.parseLong(v);
                if (n < 0) {
                    throw new NumberFormatException();
                }
                return n;
            } catch (NumberFormatException e) {
                throw BackplaneException.invalid("python backend: '" + key + "' is '" + v + "'; use a whole number ≥ 0");
            }
        }
    }
}
