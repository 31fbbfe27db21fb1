package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads the flat JSON objects the stub sends (request parameters, metric labels): string,
 * number, boolean values; nested values are refused with a clear error.
 */
final class FlatJson {
    private final String s;
    private int pos;

    private FlatJson(String s) {
        this.s = s;
    }

    /** Parses {@code {"k": v, ...}} into String, Long, Double or Boolean values; empty text is an empty map. */
    static Map<String, Object> parse(String json) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (json.isBlank()) {
            return out;
        }
        FlatJson p = new FlatJson(json);
        p.ws();
        p.expect('{');
        p.ws();
        if (p.peek() == '}') {
            p.pos++;
            return out;
        }
        while (true) {
            p.ws();
            String key = p.string();
            p.ws();
            p.expect(':');
            p.ws();
            out.put(key, p.value(key));
            p.ws();
            char c = p.next();
            if (c == '}') {
                return out;
            }
            if (c != ',') {
                throw p.error("expected ',' or '}'");
            }
        }
    }

    private Object value(String key) {
        char c = peek();
        if (c == '"') {
            return string();
        }
        if (s.startsWith("true", pos)) {
            pos += 4;
            return Boolean.TRUE;
        }
        if (s.startsWith("false", pos)) {
            pos += 5;
            return Boolean.FALSE;
        }
        if (c == '{' || c == '[' || s.startsWith("null", pos)) {
            throw BackplaneException.invalid("parameter '" + key + "' must be a string, number or boolean (got " + s.substring(pos, Math.min(s.length(), pos + 20))
                    + "…)");
        }
        int start = pos;
        while (pos < s.length() && "+-0123456789.eE".indexOf(s.charAt(pos)) >= 0) {
            pos++;
        }
        String num = s.substring(start, pos);
        try {
            if (num.contains(".") || num.contains("e") || num.contains("E")) {
                return Double.parseDouble(num);
            }
            return Long.parseLong(num);
        } catch (NumberFormatException e) {
            throw error("bad number '" + num + "'");
        }
    }

    private String string() {
        expect('"');
        StringBuilder b = new StringBuilder();
        while (true) {
            char c = next();
            if (c == '"') {
                return b.toString();
            }
            if (c == '\\') {
                char e = next();
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        if (pos + 4 > s.length()) {
                            throw error("truncated \\u escape");
                        }
                        b.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                        pos += 4;
                    }
                    default -> b.append(e);
                }
            } else {
                b.append(c);
            }
        }
    }

    private void ws() {
        while (pos < s.length() && Character.isWhitespace(s.charAt(pos))) {
            pos++;
        }
    }

    private char peek() {
        if (pos >= s.length()) {
            throw error("unexpected end");
        }
        return s.charAt(pos);
    }

    private char next() {
        char c = peek();
        pos++;
        return c;
    }

    private void expect(char c) {
        if (next() != c) {
            throw error("expected '" + c + "'");
        }
    }

    private BackplaneException error(String what) {
        return BackplaneException.invalid("parameters " + s + " are not a flat JSON object: " + what + " at character " + pos);
    }
}
