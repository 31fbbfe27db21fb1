package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.config.ModelConfig;
import java.util.Collections;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;

/**
 * A backend's settings for one model: the host-level backend options
 * ({@link BackendContext#options()}, {@code --backend-config}) overridden by the model's config
 * {@code parameters} of the same key, read with typed getters whose errors name the owner, the
 * key, the bad value and what to use instead. Immutable and thread-safe.
 *
 * <pre>{@code
 * Settings s = Settings.of("model '" + ctx.name() + "'", ctx.backend().options(), ctx.config().parameters());
 * int threads = (int) s.number("thread_count", 1, 0, 1024);
 * boolean arena = s.flag("enable_mem_arena", true);
 * s.rejectUnknown(Set.of("thread_count", "enable_mem_arena")::contains, "the mybackend backend; use thread_count or enable_mem_arena");
 * }</pre>
 */
public final class Settings {
    private final String owner;
    private final Map<String, String> values;

    private Settings(String owner, Map<String, String> values) {
        this.owner = owner;
        this.values = values;
    }

    /**
     * The settings of {@code owner} (named in every error, e.g. {@code "model 'add_sub'"}):
     * {@code backendOptions}, then {@code modelParameters}, which win.
     */
    public static Settings of(String owner, Map<String, String> backendOptions, Map<String, String> modelParameters) {
        requireNonNull(owner, "owner is null");
        Map<String, String> merged = new TreeMap<>(requireNonNull(backendOptions, "backendOptions is null"));
        merged.putAll(requireNonNull(modelParameters, "modelParameters is null"));
        return new Settings(owner, Collections.unmodifiableMap(merged));
    }

    /** Every key and its value (parameters over options), sorted by key; the host's own parameters included. */
    public Map<String, String> asMap() {
        return values;
    }

    /** The value of {@code key}, stripped; {@code def} when it is absent or blank. */
    public String string(String key, String def) {
        String v = values.get(requireNonNull(key, "key is null"));
        return v == null || v.isBlank() ? def : v.strip();
    }

    /**
     * A whole number from {@code min} to {@code max}; {@code def} when absent or blank.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the key and the value when it is not one
     */
    public long number(String key, long def, long min, long max) {
        String v = string(key, "");
        if (v.isEmpty()) {
            return def;
        }
        try {
            long n = Long.parseLong(v);
            if (n >= min && n <= max) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw invalid(key, max == Long.MAX_VALUE ? "a whole number ≥ " + min : "a whole number from " + min + " to " + max);
    }

    /**
     * A boolean: {@code true/false}, {@code 1/0}, {@code on/off}, {@code yes/no} (any case);
     * {@code def} when absent or blank.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the key and the value when it is none of these
     */
    public boolean flag(String key, boolean def) {
        String v = string(key, "");
        if (v.isEmpty()) {
            return def;
        }
        return switch (v.toLowerCase(Locale.ROOT)) {
            case "1", "true", "on", "yes" -> true;
            case "0", "false", "off", "no" -> false;
            default -> throw invalid(key, "true or false");
        };
    }

    /**
     * One of the names of {@code byName} (any case; the map's keys in upper case); {@code def}
     * when absent or blank.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the key, the value and {@code expected}
     */
    public <T> T choice(String key, T def, Map<String, T> byName, String expected) {
        String v = string(key, "");
        if (v.isEmpty()) {
            return def;
        }
        T t = byName.get(v.toUpperCase(Locale.ROOT));
        if (t == null) {
            throw invalid(key, expected);
        }
        return t;
    }

    /**
     * Rejects every key that is neither {@code known} nor one of the host's own parameters
     * ({@link ModelConfig#HOST_PARAMETERS}).
     *
     * @param knownTo completes "parameter 'k' is not known to ...", e.g. {@code "the cpu backend; use one of [a, b]"}
     * @throws BackplaneException INVALID_ARGUMENT naming the first unknown key
     */
    public void rejectUnknown(Predicate<String> known, String knownTo) {
        for (String key : new TreeSet<>(values.keySet())) {
            if (!known.test(key) && !ModelConfig.HOST_PARAMETERS.contains(key)) {
                throw BackplaneException.invalid(owner + ": parameter '" + key + "' is not known to " + knownTo);
            }
        }
    }

    /** The keys that are not the host's own parameters. */
    public Set<String> keys() {
        Set<String> out = new TreeSet<>(values.keySet());
        out.removeAll(ModelConfig.HOST_PARAMETERS);
        return out;
    }

    /** The error for a bad value of {@code key}: "OWNER: parameter KEY='VALUE' is invalid; use EXPECTED". */
    public BackplaneException invalid(String key, String expected) {
        return BackplaneException.invalid(owner + ": parameter " + key + "='" + values.getOrDefault(key, "") + "' is invalid; use " + expected);
    }

    @Override
    public String toString() {
        return owner + " settings " + values;
    }
}
