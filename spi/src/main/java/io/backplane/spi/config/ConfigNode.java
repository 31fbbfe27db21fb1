package io.backplane.spi.config;

import io.backplane.spi.Experimental;
import static java.util.Objects.requireNonNull;

import io.backplane.spi.Experimental;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A read-only view of one message of a parsed {@code config.pbtxt}: its fields, in file order,
 * each with one or more values that are either scalars (kept as text: numbers, enum names,
 * {@code true}/{@code false}, string contents without quotes) or nested messages.
 *
 * <p>{@link ModelConfig#raw()} gives the whole file as such a tree, so that a backend can read
 * Triton sections the core does not model (e.g. {@code optimization}) without the SPI growing
 * a type for each. The core still refuses sections nobody handles: a section reaches this view
 * only when the core accepts it or the model's backend declares it in
 * {@link io.backplane.spi.BackendCapabilities#configSections()}.
 *
 * <p>Immutable and thread-safe. A map field ({@code parameters}) appears as repeated messages
 * with {@code key} and {@code value} fields, as protobuf text format writes it.
 */
@Experimental
public final class ConfigNode {
    /** A message without fields: the raw view of a config built in code. */
    public static final ConfigNode EMPTY = builder().build();

    private final Map<String, List<Object>> fields;

    private ConfigNode(Map<String, List<Object>> fields) {
        Map<String, List<Object>> copy = new LinkedHashMap<>();
        fields.forEach((k, v) -> copy.put(k, List.copyOf(v)));
        this.fields = Collections.unmodifiableMap(copy);
    }

    /** A builder for a message; used by the host's parser and by tests. */
    public static Builder builder() {
        return new Builder();
    }

    /** The names of the fields present, in file order. Never null. */
    public Set<String> fieldNames() {
        return fields.keySet();
    }

    /** Whether {@code field} is present. */
    public boolean has(String field) {
        return fields.containsKey(field);
    }

    /** The first message value of {@code field}, or empty when absent or scalar. */
    public Optional<ConfigNode> section(String field) {
        return sections(field).stream().findFirst();
    }

    /** Every message value of {@code field} in file order (a repeated message field); never null. */
    public List<ConfigNode> sections(String field) {
        List<ConfigNode> out = new ArrayList<>();
        for (Object v : fields.getOrDefault(field, List.of())) {
            if (v instanceof ConfigNode n) {
                out.add(n);
            }
        }
        return List.copyOf(out);
    }

    /** The first scalar value of {@code field} as text, or empty when absent or a message. */
    public Optional<String> value(String field) {
        return values(field).stream().findFirst();
    }

    /** Every scalar value of {@code field} as text, in file order (a repeated scalar field); never null. */
    public List<String> values(String field) {
        List<String> out = new ArrayList<>();
        for (Object v : fields.getOrDefault(field, List.of())) {
            if (v instanceof String s) {
                out.add(s);
            }
        }
        return List.copyOf(out);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ConfigNode n && fields.equals(n.fields);
    }

    @Override
    public int hashCode() {
        return fields.hashCode();
    }

    /** The message in a compact text-format-like form, e.g. {@code {name: "m", input {name: "X"}}}. */
    @Override
    public String toString() {
        StringBuilder s = new StringBuilder("{");
        fields.forEach((k, vs) -> {
            for (Object v : vs) {
                if (s.length() > 1) {
                    s.append(", ");
                }
                s.append(k).append(v instanceof ConfigNode ? " " : ": ").append(v);
            }
        });
        return s.append('}').toString();
    }

    /** Builds {@link ConfigNode}s; not thread-safe. */
    public static final class Builder {
        private final Map<String, List<Object>> fields = new LinkedHashMap<>();

        private Builder() {
        }

        /** Appends a scalar value (as text) to {@code field}. */
        public Builder add(String field, String value) {
            return put(field, requireNonNull(value, "value is null"));
        }

        /** Appends a message value to {@code field}. */
        public Builder add(String field, ConfigNode value) {
            return put(field, requireNonNull(value, "value is null"));
        }

        /** Removes {@code field} and its values. */
        public Builder remove(String field) {
            fields.remove(field);
            return this;
        }

        private Builder put(String field, Object value) {
            requireNonNull(field, "field is null");
            if (field.isEmpty()) {
                throw new IllegalArgumentException("config field name is empty");
            }
            fields.computeIfAbsent(field, k -> new ArrayList<>()).add(value);
            return this;
        }

        public ConfigNode build() {
            return new ConfigNode(fields);
        }
    }
}
