package io.backplane.core.config;

import io.backplane.spi.config.ConfigNode;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Reads protobuf text format without a schema, into the {@link ConfigNode} tree that
 * {@link io.backplane.spi.config.ModelConfig#raw()} exposes, and remembers where each top-level
 * field lies in the text so the parser can hand sections a backend reads itself past the
 * schema check. It is lenient on purpose: text it cannot read yields null, and the schema-based
 * parse that always follows reports the error with its position.
 */
final class RawConfigReader {
    /** One top-level field occurrence: its name and the characters [start, end) it spans. */
    record Span(String name, int start, int end) {
    }

    /** The tree and the top-level spans. */
    record Result(ConfigNode tree, List<Span> topLevel) {
    }

    private final String text;
    private int pos;

    private RawConfigReader(String text) {
        this.text = text;
    }

    /** The tree of {@code text}, or null when it is not well-formed text format. */
    static @Nullable Result read(String text) {
        RawConfigReader r = new RawConfigReader(text);
        try {
            List<Span> spans = new ArrayList<>();
            ConfigNode tree = r.message((char) 0, spans);
            return new Result(tree, List.copyOf(spans));
        } catch (IllegalStateException e) {
            return null;
        }
    }

    /** {@code text} with the given spans replaced by blanks (line breaks kept, so positions stay valid). */
    static String blank(String text, List<Span> spans) {
        char[] c = text.toCharArray();
        for (Span s : spans) {
            for (int i = s.start(); i < s.end(); i++) {
                if (c[i] != '\n' && c[i] != '\r') {
                    c[i] = ' ';
                }
            }
        }
        return new String(c);
    }

    private ConfigNode message(char close, @Nullable List<Span> spans) {
        ConfigNode.Builder b = ConfigNode.builder();
        while (true) {
            skip();
            if (pos >= text.length()) {
                if (close != 0) {
                    throw new IllegalStateException("unclosed message");
                }
                return b.build();
            }
            char c = text.charAt(pos);
            if (c == close) {
                pos++;
                return b.build();
            }
            int start = pos;
            String name = identifier();
            skip();
            boolean colon = peek(':');
            if (colon) {
                pos++;
                skip();
            }
            if (peek('[')) {
                pos++;
                skip();
                if (peek(']')) {
                    pos++;
                } else {
                    while (true) {
                        value(name, b);
                        skip();
                        if (peek(',')) {
                            pos++;
                            continue;
                        }
                        expect(']');
                        break;
                    }
                }
            } else {
                if (!colon && !peek('{') && !peek('<')) {
                    throw new IllegalStateException("expected ':' or '{'");
                }
                value(name, b);
            }
            if (spans != null) {
                spans.add(new Span(name, start, pos));
            }
            skip();
            if (peek(',') || peek(';')) {
                pos++;
            }
        }
    }

    private void value(String name, ConfigNode.Builder b) {
        skip();
        if (peek('{')) {
            pos++;
            b.add(name, message('}', null));
        } else if (peek('<')) {
            pos++;
            b.add(name, message('>', null));
        } else if (peek('"') || peek('\'')) {
            StringBuilder s = new StringBuilder();
            while (peek('"') || peek('\'')) {
                s.append(quoted());
                skip();
            }
            b.add(name, s.toString());
        } else {
            int start = pos;
            while (pos < text.length() && (Character.isLetterOrDigit(text.charAt(pos)) || "_.+-".indexOf(text.charAt(pos)) >= 0)) {
                pos++;
            }
            if (pos == start) {
                throw new IllegalStateException("expected a value");
            }
            b.add(name, text.substring(start, pos));
        }
    }

    private String quoted() {
        char q = text.charAt(pos++);
        StringBuilder s = new StringBuilder();
        while (pos < text.length() && text.charAt(pos) != q) {
            char c = text.charAt(pos++);
            if (c == '\\' && pos < text.length()) {
                char e = text.charAt(pos++);
                s.append(switch (e) {
                    case 'n' -> '\n';
                    case 't' -> '\t';
                    case 'r' -> '\r';
                    default -> e;
                });
            } else if (c == '\n') {
                throw new IllegalStateException("line break in a string");
            } else {
                s.append(c);
            }
        }
        expect(q);
        return s.toString();
    }

    private String identifier() {
        int start = pos;
        while (pos < text.length() && (Character.isLetterOrDigit(text.charAt(pos)) || text.charAt(pos) == '_')) {
            pos++;
        }
        if (pos == start) {
            throw new IllegalStateException("expected a field name");
        }
        return text.substring(start, pos);
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

    private boolean peek(char c) {
        return pos < text.length() && text.charAt(pos) == c;
    }

    private void expect(char c) {
        if (!peek(c)) {
            throw new IllegalStateException("expected '" + c + "'");
        }
        pos++;
    }
}
