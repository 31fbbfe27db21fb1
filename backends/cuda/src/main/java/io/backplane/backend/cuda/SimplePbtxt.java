package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small reader for the subset of {@code config.pbtxt} that cuda models use (name, backend,
 * max_batch_size, input, output, instance_group, parameters, default_model_filename;
 * dynamic_batching is accepted and ignored). It exists so that {@link GpuSelfTest} and this
 * module's tests can load the sample model without the core; the core's own parser is the one a
 * host uses, and it rejects what it does not support.
 */
final class SimplePbtxt {
    private final String text;
    private int pos;

    private SimplePbtxt(String text) {
        this.text = text;
    }

    /** Parses {@code text} into a {@link ModelConfig}. */
    static ModelConfig parse(String text) {
        Map<String, List<Object>> root = new SimplePbtxt(text).message(false);
        ModelConfig.Builder b = ModelConfig.builder(string(root, "name", ""));
        b.backend(string(root, "backend", "")).platform(string(root, "platform", ""));
        b.maxBatchSize(Integer.parseInt(string(root, "max_batch_size", "0")));
        b.defaultModelFilename(string(root, "default_model_filename", ""));
        for (Map<String, List<Object>> t : messages(root, "input")) {
            b.input(tensor(t));
        }
        for (Map<String, List<Object>> t : messages(root, "output")) {
            b.output(tensor(t));
        }
        int g = 0;
        for (Map<String, List<Object>> ig : messages(root, "instance_group")) {
            String kind = string(ig, "kind", "KIND_AUTO");
            List<Integer> gpus = ig.getOrDefault("gpus", List.of()).stream().map(o -> Integer.parseInt((String) o)).toList();
            b.instanceGroup(InstanceGroup.of(string(ig, "name", "group_" + g++), Integer.parseInt(string(ig, "count", "1")),
                    InstanceKind.valueOf(kind.substring("KIND_".length())), gpus));
        }
        if (root.containsKey("dynamic_batching")) {
            b.dynamicBatching(DynamicBatching.DEFAULT);
        }
        for (Map<String, List<Object>> p : messages(root, "parameters")) {
            Map<String, List<Object>> value = messages(p, "value").getFirst();
            b.parameter(string(p, "key", ""), string(value, "string_value", ""));
        }
        return b.build();
    }

    private static TensorConfig tensor(Map<String, List<Object>> t) {
        List<Long> dims = t.getOrDefault("dims", List.of()).stream().map(o -> Long.parseLong((String) o)).toList();
        return TensorConfig.builder(string(t, "name", ""), DataType.fromConfigName(string(t, "data_type", ""))).dims(dims).build();
    }

    private static String string(Map<String, List<Object>> m, String key, String dflt) {
        List<Object> v = m.get(key);
        return v == null || v.isEmpty() ? dflt : (String) v.getFirst();
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, List<Object>>> messages(Map<String, List<Object>> m, String key) {
        List<Map<String, List<Object>>> out = new ArrayList<>();
        for (Object o : m.getOrDefault(key, List.of())) {
            out.add((Map<String, List<Object>>) o);
        }
        return out;
    }

    private Map<String, List<Object>> message(boolean braced) {
        Map<String, List<Object>> fields = new LinkedHashMap<>();
        while (true) {
            skip();
            if (pos >= text.length()) {
                if (braced) {
                    throw error("a '}' is missing");
                }
                return fields;
            }
            if (text.charAt(pos) == '}') {
                if (!braced) {
                    throw error("unexpected '}'");
                }
                pos++;
                return fields;
            }
            String key = identifier();
            skip();
            if (peek(':')) {
                pos++;
                skip();
            }
            List<Object> values = fields.computeIfAbsent(key, k -> new ArrayList<>());
            if (peek('[')) {
                pos++;
                while (true) {
                    skip();
                    if (peek(']')) {
                        pos++;
                        break;
                    }
                    values.add(value());
                    skip();
                    if (peek(',')) {
                        pos++;
                    }
                }
            } else {
                values.add(value());
            }
            skip();
            if (peek(',') || peek(';')) {
                pos++;
            }
        }
    }

    private Object value() {
        if (peek('{')) {
            pos++;
            return message(true);
        }
        if (peek('"') || peek('\'')) {
            char q = text.charAt(pos++);
            StringBuilder sb = new StringBuilder();
            while (pos < text.length() && text.charAt(pos) != q) {
                char c = text.charAt(pos++);
                if (c == '\\' && pos < text.length()) {
                    c = text.charAt(pos++);
                }
                sb.append(c);
            }
            if (pos >= text.length()) {
                throw error("an unterminated string");
            }
            pos++;
            return sb.toString();
        }
        int start = pos;
        while (pos < text.length() && (Character.isLetterOrDigit(text.charAt(pos)) || "_-+.".indexOf(text.charAt(pos)) >= 0)) {
            pos++;
        }
        if (start == pos) {
            throw error("a value was expected");
        }
        return text.substring(start, pos);
    }

    private String identifier() {
        int start = pos;
        while (pos < text.length() && (Character.isLetterOrDigit(text.charAt(pos)) || text.charAt(pos) == '_')) {
            pos++;
        }
        if (start == pos) {
            throw error("a field name was expected");
        }
        return text.substring(start, pos);
    }

    private boolean peek(char c) {
        return pos < text.length() && text.charAt(pos) == c;
    }

    private void skip() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c == '#') {
                while (pos < text.length() && text.charAt(pos) != '\n') {
                    pos++;
                }
            } else if (Character.isWhitespace(c)) {
                pos++;
            } else {
                return;
            }
        }
    }

    private BackplaneException error(String what) {
        int line = 1;
        for (int i = 0; i < Math.min(pos, text.length()); i++) {
            if (text.charAt(i) == '\n') {
                line++;
            }
        }
        return BackplaneException.invalid("config.pbtxt line " + line + ": " + what);
    }
}
