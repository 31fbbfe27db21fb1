package io.backplane.protocol;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;

/**
 * Which API groups need a header, and which header: Triton's {@code --http-restricted-api} and
 * {@code --grpc-restricted-protocol}, one table for both frontends. A specification is
 * {@code <api>[,<api>...]:<header>=<value>}, repeatable (joined with {@code ;} in a frontend
 * option); a request to a restricted group without the header, or with another value, is refused
 * (REST: 403, gRPC: UNAVAILABLE, as Triton does) with a message naming the header it expects.
 *
 * <p>Endpoints join the table through {@link Api}: REST routes are classified by path
 * ({@link #restApi}), gRPC methods by name ({@link #grpcApi}); an endpoint added later names its
 * group there and is restricted like the others. Immutable and thread-safe.
 */
public final class RestrictedApis {
    /** The API groups, with Triton's names. */
    public enum Api {
        HEALTH("health"),
        METADATA("metadata"),
        INFERENCE("inference"),
        SHARED_MEMORY("shared-memory"),
        MODEL_CONFIG("model-config"),
        MODEL_REPOSITORY("model-repository"),
        STATISTICS("statistics"),
        TRACE("trace"),
        LOGGING("logging");

        private final String tritonName;

        Api(String tritonName) {
            this.tritonName = tritonName;
        }

        /** The name used on the command line, e.g. {@code model-repository}. */
        public String tritonName() {
            return tritonName;
        }

        static Optional<Api> byName(String name) {
            return Arrays.stream(values()).filter(a -> a.tritonName.equals(name)).findFirst();
        }
    }

    /** The header a restricted group requires. Header names compare case-insensitively; values exactly. */
    public record Requirement(String header, String value) {
        public Requirement {
            requireNonNull(header, "header is null");
            requireNonNull(value, "value is null");
            header = header.toLowerCase(Locale.ROOT);
        }
    }

    private static final RestrictedApis NONE = new RestrictedApis(Map.of());

    private final Map<Api, Requirement> table;

    private RestrictedApis(Map<Api, Requirement> table) {
        this.table = Map.copyOf(table);
    }

    /** No group restricted. */
    public static RestrictedApis none() {
        return NONE;
    }

    /**
     * Parses {@code spec}: specifications separated by {@code ;}, each
     * {@code <api>[,<api>...]:<header>=<value>}. A group named twice, an unknown group or a
     * malformed specification is an INVALID_ARGUMENT error naming it and the known groups.
     *
     * @param option the option's name, for messages (e.g. {@code --http-restricted-api})
     */
    public static RestrictedApis parse(String option, @Nullable String spec) {
        requireNonNull(option, "option is null");
        if (spec == null || spec.isBlank()) {
            return NONE;
        }
        Map<Api, Requirement> table = new EnumMap<>(Api.class);
        String kind = option.contains("grpc") ? "protocol" : "api"; // Triton's gRPC groups are protocols, its REST ones apis
        for (String one : spec.split(";")) {
            if (one.isBlank()) {
                continue;
            }
            int colon = one.indexOf(':');
            int eq = colon < 0 ? -1 : one.indexOf('=', colon);
            if (colon <= 0 || eq <= colon + 1) {
                throw BackplaneException.invalid(option + " '" + one + "' is not <api>[,<api>...]:<header>=<value>; apis: " + known());
            }
            Requirement req = new Requirement(one.substring(colon + 1, eq).trim(), one.substring(eq + 1));
            for (String name : one.substring(0, colon).split(",")) {
                String n = name.trim().toLowerCase(Locale.ROOT);
                // Triton's words (its QA looks for them in the server log), then ours.
                Api api = Api.byName(n).orElseThrow(() -> BackplaneException.invalid(option + ": unknown restricted " + kind + " '" + n
                        + "'; the " + kind + "s are: " + known()));
                if (table.putIfAbsent(api, req) != null) {
                    throw BackplaneException.invalid(option + ": " + kind + " '" + n + "' can not be specified in multiple config groups; name"
                            + " each " + kind + " in one group");
                }
            }
        }
        return new RestrictedApis(table);
    }

    private static String known() {
        return Arrays.stream(Api.values()).map(Api::tritonName).collect(Collectors.joining(", "));
    }

    /** Whether no group is restricted. */
    public boolean isEmpty() {
        return table.isEmpty();
    }

    /** The groups restricted, and their headers. */
    public Map<Api, Requirement> table() {
        return table;
    }

    /**
     * Checks one request: {@code null} when allowed, else the message to refuse it with.
     *
     * @param api the request's group
     * @param headers reads a request header by lower-case name; {@code null} when absent
     */
    public @Nullable String refusal(Api api, Function<String, @Nullable String> headers) {
        return refusal(api, "", headers);
    }

    /**
     * Checks one request whose headers carry a prefix before the configured name: Triton's gRPC
     * frontend expects {@code triton-grpc-protocol-<key>} ({@link #GRPC_HEADER_PREFIX}) for a
     * group restricted with {@code <key>=<value>}, its REST frontend {@code <key>} itself.
     *
     * @return {@code null} when allowed, else the message to refuse it with, naming the whole header
     */
    public @Nullable String refusal(Api api, String headerPrefix, Function<String, @Nullable String> headers) {
        Requirement req = table.get(requireNonNull(api, "api is null"));
        if (req == null) {
            return null;
        }
        String header = headerPrefix + req.header();
        String got = headers.apply(header);
        if (req.value().equals(got)) {
            return null;
        }
        return "This API is restricted, expecting header '" + header + "'";
    }

    /** The prefix of a gRPC call's restriction header, as Triton's: a group restricted with {@code k=v} wants {@code triton-grpc-protocol-k: v}. */
    public static final String GRPC_HEADER_PREFIX = "triton-grpc-protocol-";

    /**
     * The group of a REST path under {@code /v2}, given its decoded segments after {@code v2}
     * (e.g. {@code [models, m, infer]}).
     */
    public static Api restApi(List<String> seg) {
        if (seg.isEmpty()) {
            return Api.METADATA;
        }
        String last = seg.getLast();
        return switch (seg.getFirst()) {
            case "health" -> Api.HEALTH;
            case "repository" -> Api.MODEL_REPOSITORY;
            case "systemsharedmemory", "cudasharedmemory" -> Api.SHARED_MEMORY;
            case "trace" -> Api.TRACE;
            case "logging" -> Api.LOGGING;
            case "models" -> switch (seg.size() <= 2 ? "" : last) {
                case "infer", "generate", "generate_stream" -> Api.INFERENCE;
                case "config" -> Api.MODEL_CONFIG;
                case "stats" -> Api.STATISTICS;
                case "ready" -> Api.HEALTH;
                case "trace" -> Api.TRACE;
                case "setting" -> seg.get(seg.size() - 2).equals("trace") ? Api.TRACE : Api.METADATA;
                default -> seg.size() >= 2 && seg.get(1).equals("stats") ? Api.STATISTICS : Api.METADATA;
            };
            default -> Api.METADATA;
        };
    }

    /** The group of a method of Triton's {@code inference.GRPCInferenceService}, by its bare name (e.g. {@code ModelInfer}). */
    public static Api grpcApi(String method) {
        return switch (method) {
            case "ServerLive", "ServerReady", "ModelReady" -> Api.HEALTH;
            case "ModelInfer", "ModelStreamInfer" -> Api.INFERENCE;
            case "ModelConfig" -> Api.MODEL_CONFIG;
            case "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload" -> Api.MODEL_REPOSITORY;
            case "ModelStatistics" -> Api.STATISTICS;
            case "TraceSetting" -> Api.TRACE;
            case "LogSettings" -> Api.LOGGING;
            case "SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
                 "CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister" -> Api.SHARED_MEMORY;
            default -> Api.METADATA;
        };
    }
}
