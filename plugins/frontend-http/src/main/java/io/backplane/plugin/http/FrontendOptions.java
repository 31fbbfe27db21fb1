package io.backplane.plugin.http;

import io.backplane.spi.BackplaneException;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The {@code http} frontend's options, checked: an unknown key or a bad value is an
 * INVALID_ARGUMENT error naming it.
 *
 * @param host address to bind ({@code host}, default {@code 0.0.0.0})
 * @param port port to bind ({@code port}, default 8000; 0 picks a free port)
 * @param maxBodyBytes largest request body accepted ({@code max_body_bytes}, default 64 MiB); larger bodies get 413
 * @param threads Netty event-loop threads ({@code threads}, default: available processors)
 * @param drainMillis how long {@code close()} waits for in-flight requests ({@code drain_timeout_ms}, default 5000)
 */
record FrontendOptions(String host, int port, int maxBodyBytes, int threads, long drainMillis) {
    static final Map<String, String> DOCUMENTATION = Map.of(
            "host", "address to bind (default 0.0.0.0)",
            "port", "port to bind (default 8000; 0 picks a free port)",
            "max_body_bytes", "largest request body in bytes (default 67108864); larger bodies are answered 413",
            "threads", "Netty event-loop threads (default: available processors)",
            "drain_timeout_ms", "how long close waits for in-flight requests (default 5000)");

    static FrontendOptions parse(Map<String, String> options) {
        Set<String> unknown = new TreeSet<>(options.keySet());
        unknown.removeAll(DOCUMENTATION.keySet());
        if (!unknown.isEmpty()) {
            throw BackplaneException.invalid("http frontend: unknown option(s) " + unknown + "; known options: " + new TreeSet<>(DOCUMENTATION.keySet()));
        }
        String host = options.getOrDefault("host", "0.0.0.0");
        int port = (int) number(options, "port", 8000, 0, 65535);
        int maxBody = (int) number(options, "max_body_bytes", 64L << 20, 1, Integer.MAX_VALUE);
        int threads = (int) number(options, "threads", Runtime.getRuntime().availableProcessors(), 1, 1024);
        long drain = number(options, "drain_timeout_ms", 5000, 0, 3_600_000);
        return new FrontendOptions(host, port, maxBody, threads, drain);
    }

    private static long number(Map<String, String> options, String key, long dflt, long min, long max) {
        String v = options.get(key);
        if (v == null) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw BackplaneException.invalid("http frontend: option " + key + "='" + v + "' is not an integer");
        }
        if (n < min || n > max) {
            throw BackplaneException.invalid("http frontend: option " + key + "=" + n + " is out of range [" + min + ", " + max + "]");
        }
        return n;
    }
}
