package io.backplane.plugin.http;

import com.sun.management.UnixOperatingSystemMXBean;
import io.backplane.protocol.RestrictedApis;
import io.backplane.spi.BackplaneException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * The {@code http} frontend's options, checked: an unknown key or a bad value is an
 * INVALID_ARGUMENT error naming it.
 *
 * @param host address to bind ({@code host}, default {@code 0.0.0.0})
 * @param port port to bind ({@code port}, default 8000; 0 picks a free port)
 * @param maxBodyBytes largest JSON (or other non-binary) request body ({@code max_body_bytes}, default 64 MiB, Triton's); larger bodies get 400
 * @param maxBinaryBodyBytes largest body of the binary tensor extension ({@code max_binary_body_bytes}, default 2 GiB - 1: the host's
 *     memory budget is the limit that matters); larger bodies get 400
 * @param threads Netty event-loop threads ({@code threads}, default: available processors)
 * @param drainMillis how long {@code close()} waits for in-flight requests ({@code drain_timeout_ms}, default 5000)
 * @param maxConnections connections held at once ({@code max_connections}); above it the longest-idle one is evicted
 * @param idleTimeoutMillis a connection with no request under way is closed after this ({@code idle_timeout_ms})
 * @param headerTimeoutMillis a request's headers must arrive within this ({@code header_timeout_ms}), else 408 and close
 * @param bodyTimeoutMillis a request's body must arrive within this after its headers ({@code body_timeout_ms}), else 408 and close
 * @param maxPipelined requests read ahead on one connection while one is served ({@code max_pipelined})
 * @param restricted API groups that need a header ({@code restricted_api}, Triton's {@code --http-restricted-api} syntax, {@code ;}-separated)
 * @param sslCert PEM certificate chain file for TLS ({@code ssl_cert}); with {@code ssl_key}, the frontend serves HTTPS
 * @param sslKey PEM PKCS#8 private key file for TLS ({@code ssl_key})
 * @param healthJson whether the health and model-ready answers carry the Open Inference Protocol's JSON body
 *     ({@code health_body}: {@code json}, the default, which KServe's client parses; {@code empty}, Triton's answer)
 */
record FrontendOptions(String host, int port, int maxBodyBytes, int maxBinaryBodyBytes, int threads, long drainMillis, int maxConnections, long idleTimeoutMillis,
                       long headerTimeoutMillis, long bodyTimeoutMillis, int maxPipelined, RestrictedApis restricted,
                       @Nullable Path sslCert, @Nullable Path sslKey, boolean healthJson) {
    static final Map<String, String> DOCUMENTATION = Map.ofEntries(
            Map.entry("host", "address to bind (default 0.0.0.0)"),
            Map.entry("port", "port to bind (default 8000; 0 picks a free port)"),
            Map.entry("max_body_bytes", "largest JSON (or raw binary) request body in bytes, and the largest a compressed body may inflate to (default 67108864; serve flag --http-max-input-size); larger bodies are answered 400"),
            Map.entry("max_binary_body_bytes", "largest binary-tensor request body in bytes (default 2147483647; the host's memory budget "
                    + "refuses, 503, what it cannot hold); larger bodies are answered 400"),
            Map.entry("threads", "Netty event-loop threads (default: available processors)"),
            Map.entry("drain_timeout_ms", "how long close waits for in-flight requests before answering them 503 (default 5000)"),
            Map.entry("max_connections", "connections held at once (default: a quarter of the process's file-descriptor limit, at least 64); "
                    + "above it the longest-idle connection is closed, or the new one when all are busy"),
            Map.entry("idle_timeout_ms", "a connection with no request under way is closed after this (default 60000; 0: never)"),
            Map.entry("header_timeout_ms", "a request's headers must arrive within this, else 408 and close (default 10000; 0: no limit)"),
            Map.entry("body_timeout_ms", "a request's body must arrive within this after its headers, else 408 and close (default 60000; 0: no limit)"),
            Map.entry("max_pipelined", "requests read ahead on one connection while one is served (default 16)"),
            Map.entry("restricted_api", "<api>[,<api>...]:<header>=<value>, ';'-separated: API groups that need a header (Triton's --http-restricted-api)"),
            Map.entry("ssl_cert", "PEM certificate chain file; with ssl_key the frontend serves HTTPS"),
            Map.entry("ssl_key", "PEM PKCS#8 private key file for ssl_cert"),
            Map.entry("health_body", "json (default): /v2/health/{live,ready} and model ready answer {\"live\":…}/{\"ready\":…}, which KServe's"
                    + " client parses; empty: no body, as Triton answers, for scripts that read the whole answer (curl -s -w %{http_code})"));

    static FrontendOptions parse(Map<String, String> options) {
        Set<String> unknown = new TreeSet<>(options.keySet());
        unknown.removeAll(DOCUMENTATION.keySet());
        if (!unknown.isEmpty()) {
            throw BackplaneException.invalid("http frontend: unknown option(s) " + unknown + "; known options: " + new TreeSet<>(DOCUMENTATION.keySet()));
        }
        String host = options.getOrDefault("host", "0.0.0.0");
        int port = (int) number(options, "port", 8000, 0, 65535);
        int maxBody = (int) number(options, "max_body_bytes", 64L << 20, 1, Integer.MAX_VALUE);
        int maxBinary = (int) number(options, "max_binary_body_bytes", Integer.MAX_VALUE, 1, Integer.MAX_VALUE);
        int threads = (int) number(options, "threads", Runtime.getRuntime().availableProcessors(), 1, 1024);
        long drain = number(options, "drain_timeout_ms", 5000, 0, 3_600_000);
        int maxConnections = (int) number(options, "max_connections", defaultMaxConnections(), 1, 1_000_000);
        long idle = number(options, "idle_timeout_ms", 60_000, 0, 86_400_000);
        long header = number(options, "header_timeout_ms", 10_000, 0, 86_400_000);
        long body = number(options, "body_timeout_ms", 60_000, 0, 86_400_000);
        int pipelined = (int) number(options, "max_pipelined", 16, 1, 1024);
        RestrictedApis restricted = RestrictedApis.parse("http frontend option restricted_api", options.get("restricted_api"));
        Path cert = file(options, "ssl_cert");
        Path key = file(options, "ssl_key");
        if ((cert == null) != (key == null)) {
            throw BackplaneException.invalid("http frontend: options ssl_cert and ssl_key go together; give both files (PEM) or neither");
        }
        String health = options.getOrDefault("health_body", "json");
        if (!health.equals("json") && !health.equals("empty")) {
            throw BackplaneException.invalid("http frontend: option health_body='" + health + "' is neither 'json' nor 'empty'");
        }
        return new FrontendOptions(host, port, maxBody, maxBinary, threads, drain, maxConnections, idle, header, body, pipelined, restricted, cert, key,
                health.equals("json"));
    }

    /** A quarter of the file-descriptor limit, so connections never starve the stubs and files the host needs. */
    static long defaultMaxConnections() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof UnixOperatingSystemMXBean unix) {
            return Math.max(64, Math.min(100_000, unix.getMaxFileDescriptorCount() / 4));
        }
        return 1024;
    }

    private static @Nullable Path file(Map<String, String> options, String key) {
        String v = options.get(key);
        if (v == null) {
            return null;
        }
        Path p = Path.of(v);
        if (!Files.isReadable(p)) {
            throw BackplaneException.invalid("http frontend: option " + key + "='" + v + "' is not a readable file");
        }
        return p;
    }
    private static long number(Map<String, String> options, String key, long dflt, long min, long max) {
        return io.backplane.protocol.FrontendSettings.number("http frontend", options, key, dflt, min, max);
    }
}
