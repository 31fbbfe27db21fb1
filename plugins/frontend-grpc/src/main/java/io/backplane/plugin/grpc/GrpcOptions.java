package io.backplane.plugin.grpc;

import io.backplane.spi.BackplaneException;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/** The {@code grpc} frontend's options, checked; see {@link GrpcFrontendFactory}. */
record GrpcOptions(String host, int port, int maxMessageBytes, int threads, long drainMillis) {
    static final Map<String, String> DOCUMENTATION = Map.of(
            "host", "address to bind (default 0.0.0.0)",
            "port", "port to bind (default 8001; 0 picks a free port)",
            "max_message_bytes", "largest inbound message in bytes (default 67108864); larger ones fail with RESOURCE_EXHAUSTED",
            "threads", "Netty event-loop threads (default: available processors)",
            "drain_timeout_ms", "how long close waits for open calls (default 5000)");

    static GrpcOptions parse(Map<String, String> options) {
        Set<String> unknown = new TreeSet<>(options.keySet());
        unknown.removeAll(DOCUMENTATION.keySet());
        if (!unknown.isEmpty()) {
            throw BackplaneException.invalid("grpc frontend: unknown option(s) " + unknown + "; known options: " + new TreeSet<>(DOCUMENTATION.keySet()));
        }
        return new GrpcOptions(options.getOrDefault("host", "0.0.0.0"), (int) number(options, "port", 8001, 0, 65535),
                (int) number(options, "max_message_bytes", 64L << 20, 1, Integer.MAX_VALUE),
                (int) number(options, "threads", Runtime.getRuntime().availableProcessors(), 1, 1024),
                number(options, "drain_timeout_ms", 5000, 0, 3_600_000));
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
            throw BackplaneException.invalid("grpc frontend: option " + key + "='" + v + "' is not an integer");
        }
        if (n < min || n > max) {
            throw BackplaneException.invalid("grpc frontend: option " + key + "=" + n + " is out of range [" + min + ", " + max + "]");
        }
        return n;
    }
}
