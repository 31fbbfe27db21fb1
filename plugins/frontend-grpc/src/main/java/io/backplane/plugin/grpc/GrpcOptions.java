package io.backplane.plugin.grpc;

import io.backplane.protocol.RestrictedApis;
import io.backplane.spi.BackplaneException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * The {@code grpc} frontend's options, checked; see {@link GrpcFrontendFactory}. Keep-alive and
 * TLS options follow Triton's {@code --grpc-*} flags of the same meaning.
 */
record GrpcOptions(String host, int port, int maxMessageBytes, int threads, long drainMillis, long keepaliveTimeMillis, long keepaliveTimeoutMillis,
                   long permitKeepaliveTimeMillis, boolean permitKeepaliveWithoutCalls, long maxConnectionIdleMillis, long maxConnectionAgeMillis,
                   long maxConnectionAgeGraceMillis, long handshakeTimeoutMillis, RestrictedApis restricted,
                   @Nullable Path sslCert, @Nullable Path sslKey, @Nullable Path sslRootCert, boolean sslMutual,
                   int maxConnections, int flowControlWindowBytes) {
    static final Map<String, String> DOCUMENTATION = Map.ofEntries(
            Map.entry("host", "address to bind (default 0.0.0.0)"),
            Map.entry("port", "port to bind (default 8001; 0 picks a free port)"),
            Map.entry("max_message_bytes", "largest inbound message in bytes (default 67108864); larger ones fail with RESOURCE_EXHAUSTED"),
            Map.entry("threads", "Netty event-loop threads (default: available processors)"),
            Map.entry("drain_timeout_ms", "how long close waits for open calls before cancelling them (default 5000)"),
            Map.entry("keepalive_time_ms", "server pings a connection silent this long (default 7200000, Triton's --grpc-keepalive-time)"),
            Map.entry("keepalive_timeout_ms", "closes the connection when a ping is not acknowledged within this (default 20000)"),
            Map.entry("permit_keepalive_time_ms", "clients may ping no more often than this; faster pingers are disconnected "
                    + "(default 300000, Triton's --grpc-http2-min-recv-ping-interval-without-data)"),
            Map.entry("permit_keepalive_without_calls", "whether clients may ping with no call open (default false)"),
            Map.entry("max_connections", "connections held at once (default: a quarter of the process's file-descriptor limit, at least 64); "
                    + "a connection over it is closed as it is accepted"),
            Map.entry("flow_control_window_bytes", "HTTP/2 flow-control window of each call and of each connection, in bytes "
                    + "(default 16777216): how much a client may send before the server acknowledges it; a window smaller than a "
                    + "message makes every such message wait for window updates"),
            Map.entry("max_connection_idle_ms", "a connection with no call open this long is closed (default 60000; 0: never)"),
            Map.entry("max_connection_age_ms", "a connection older than this is asked to reconnect (default 0: no limit)"),
            Map.entry("max_connection_age_grace_ms", "calls open at max_connection_age_ms get this long to finish (default 30000)"),
            Map.entry("handshake_timeout_ms", "a connection must finish its HTTP/2 (and TLS) handshake within this (default 10000)"),
            Map.entry("restricted_protocol", "<api>[,<api>...]:<header>=<value>, ';'-separated: API groups that need a header "
                    + "(Triton's --grpc-restricted-protocol)"),
            Map.entry("ssl_cert", "PEM certificate chain file; with ssl_key the frontend serves TLS (Triton's --grpc-server-cert)"),
            Map.entry("ssl_key", "PEM PKCS#8 private key file (Triton's --grpc-server-key)"),
            Map.entry("ssl_root_cert", "PEM file of the CAs that sign client certificates (Triton's --grpc-root-cert)"),
            Map.entry("ssl_mutual", "true: clients must present a certificate signed by ssl_root_cert (mTLS, Triton's --grpc-use-ssl-mutual)"));

    /** 16 MiB: a few large tensors in flight per connection; grpc-java's own default (1 MiB) is smaller than one 6 MB tensor. */
    static final int DEFAULT_FLOW_CONTROL_WINDOW = 16 << 20;

    static GrpcOptions parse(Map<String, String> options) {
        Set<String> unknown = new TreeSet<>(options.keySet());
        unknown.removeAll(DOCUMENTATION.keySet());
        if (!unknown.isEmpty()) {
            throw BackplaneException.invalid("grpc frontend: unknown option(s) " + unknown + "; known options: " + new TreeSet<>(DOCUMENTATION.keySet()));
        }
        Path cert = file(options, "ssl_cert");
        Path key = file(options, "ssl_key");
        Path root = file(options, "ssl_root_cert");
        boolean mutual = bool(options, "ssl_mutual", false);
        if ((cert == null) != (key == null)) {
            throw BackplaneException.invalid("grpc frontend: options ssl_cert and ssl_key go together; give both files (PEM) or neither");
        }
        if (mutual && (cert == null || root == null)) {
            throw BackplaneException.invalid("grpc frontend: ssl_mutual=true needs ssl_cert, ssl_key and ssl_root_cert (the CA that signs client certificates)");
        }
        long day = 86_400_000L;
        return new GrpcOptions(options.getOrDefault("host", "0.0.0.0"), (int) number(options, "port", 8001, 0, 65535),
                (int) number(options, "max_message_bytes", 64L << 20, 1, Integer.MAX_VALUE),
                (int) number(options, "threads", Runtime.getRuntime().availableProcessors(), 1, 1024),
                number(options, "drain_timeout_ms", 5000, 0, 3_600_000),
                number(options, "keepalive_time_ms", 7_200_000, 1, 100 * day),
                number(options, "keepalive_timeout_ms", 20_000, 1, day),
                number(options, "permit_keepalive_time_ms", 300_000, 0, 100 * day),
                bool(options, "permit_keepalive_without_calls", false),
                number(options, "max_connection_idle_ms", 60_000, 0, 100 * day),
                number(options, "max_connection_age_ms", 0, 0, 100 * day),
                number(options, "max_connection_age_grace_ms", 30_000, 0, 100 * day),
                number(options, "handshake_timeout_ms", 10_000, 1, day),
                RestrictedApis.parse("grpc frontend option restricted_protocol", options.get("restricted_protocol")),
                cert, key, root, mutual,
                (int) number(options, "max_connections", defaultMaxConnections(), 1, 1_000_000),
                (int) number(options, "flow_control_window_bytes", DEFAULT_FLOW_CONTROL_WINDOW, 65_535, Integer.MAX_VALUE));
    }

    /** A quarter of the file-descriptor limit, so connections never starve the stubs and files the host needs. */
    static long defaultMaxConnections() {
        if (java.lang.management.ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.UnixOperatingSystemMXBean unix) {
            return Math.max(64, Math.min(100_000, unix.getMaxFileDescriptorCount() / 4));
        }
        return 1024;
    }

    private static boolean bool(Map<String, String> options, String key, boolean dflt) {
        String v = options.get(key);
        if (v == null) {
            return dflt;
        }
        return switch (v.trim().toLowerCase(Locale.ROOT)) {
            case "true", "1", "yes" -> true;
            case "false", "0", "no" -> false;
            default -> throw BackplaneException.invalid("grpc frontend: option " + key + "='" + v + "' is not true or false");
        };
    }

    private static @Nullable Path file(Map<String, String> options, String key) {
        String v = options.get(key);
        if (v == null) {
            return null;
        }
        Path p = Path.of(v);
        if (!Files.isReadable(p)) {
            throw BackplaneException.invalid("grpc frontend: option " + key + "='" + v + "' is not a readable file");
        }
        return p;
    }

    private static long number(Map<String, String> options, String key, long dflt, long min, long max) {
        return io.backplane.protocol.FrontendSettings.number("grpc frontend", options, key, dflt, min, max);
    }
}
