package io.backplane.plugin.openai;

import io.backplane.protocol.RestrictedApis;
import io.backplane.spi.BackplaneException;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * The {@code openai} frontend's options, checked: an unknown key or a bad value is an
 * INVALID_ARGUMENT error naming it.
 *
 * @param host address to bind ({@code host}, default {@code 0.0.0.0})
 * @param port port to bind ({@code port}, default 9000 as Triton's OpenAI frontend; 0 picks a free port)
 * @param apiKey the key clients must send as {@code Authorization: Bearer <key>} ({@code api_key}); null: no key asked
 * @param maxBodyBytes largest request body ({@code max_body_bytes}, default 16 MiB); larger bodies get 413
 * @param threads Netty event-loop threads ({@code threads}, default: available processors, at most 4)
 * @param drainMillis how long {@code close()} waits for open requests before ending them ({@code drain_timeout_ms}, default 5000)
 * @param defaultMaxTokens {@code max_tokens} for a request that sets none ({@code default_max_tokens}, default 16 as Triton's)
 * @param restricted API groups that need a header ({@code restricted_api}: {@code inference} for completions, chat and
 *     embeddings, {@code model-repository} for {@code /v1/models}, {@code health} for {@code /health/ready})
 */
record OpenAiOptions(String host, int port, @Nullable String apiKey, int maxBodyBytes, int threads, long drainMillis, int defaultMaxTokens,
                     RestrictedApis restricted, int maxConnections, long idleTimeoutMillis) {
    static final int DEFAULT_PORT = 9000;
    static final Map<String, String> DOCUMENTATION = Map.ofEntries(
            Map.entry("host", "address to bind (default 0.0.0.0)"),
            Map.entry("port", "port to bind (default 9000; 0 picks a free port)"),
            Map.entry("api_key", "clients must send Authorization: Bearer <api_key> (default: no key asked)"),
            Map.entry("max_body_bytes", "largest request body in bytes (default 16777216); larger bodies are answered 413"),
            Map.entry("threads", "Netty event-loop threads (default: available processors, at most 4)"),
            Map.entry("drain_timeout_ms", "how long close waits for open requests before ending them (default 5000)"),
            Map.entry("default_max_tokens", "max_tokens of a request that sets none (default 16)"),
            Map.entry("max_connections", "connections held at once (default 1024); above it a new connection is closed"),
            Map.entry("idle_timeout_ms", "a connection that sends nothing for this long while none of its answers is under way is closed "
                    + "(default 60000; 0: never)"),
            Map.entry("restricted_api", "<api>[,<api>...]:<header>=<value>, ';'-separated: inference (completions, chat, embeddings), "
                    + "model-repository (/v1/models), health (/health/ready) need a header"));

    static OpenAiOptions parse(Map<String, String> options) {
        Set<String> unknown = new TreeSet<>(options.keySet());
        unknown.removeAll(DOCUMENTATION.keySet());
        if (!unknown.isEmpty()) {
            throw BackplaneException.invalid("openai frontend: unknown option(s) " + unknown + "; known options: " + new TreeSet<>(DOCUMENTATION.keySet()));
        }
        String key = options.get("api_key");
        if (key != null && key.isBlank()) {
            throw BackplaneException.invalid("openai frontend: option api_key is blank; give the key clients must send, or leave the option out");
        }
        return new OpenAiOptions(options.getOrDefault("host", "0.0.0.0"),
                (int) number(options, "port", DEFAULT_PORT, 0, 65535),
                key,
                (int) number(options, "max_body_bytes", 16L << 20, 1024, Integer.MAX_VALUE),
                (int) number(options, "threads", Math.min(4, Runtime.getRuntime().availableProcessors()), 1, 1024),
                number(options, "drain_timeout_ms", 5000, 0, 3_600_000),
                (int) number(options, "default_max_tokens", 16, 1, Integer.MAX_VALUE),
                RestrictedApis.parse("openai frontend option restricted_api", options.get("restricted_api")),
                (int) number(options, "max_connections", 1024, 1, 1_000_000),
                number(options, "idle_timeout_ms", 60_000, 0, 86_400_000));
    }

    private static long number(Map<String, String> options, String key, long dflt, long min, long max) {
        return io.backplane.protocol.FrontendSettings.number("openai frontend", options, key, dflt, min, max);
    }
}
