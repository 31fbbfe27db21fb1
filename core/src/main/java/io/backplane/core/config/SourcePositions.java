package io.backplane.core.config;

import static java.util.Objects.requireNonNull;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import com.google.protobuf.TextFormatParseInfoTree;
import com.google.protobuf.TextFormatParseLocation;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Where each field of a parsed config came from, addressed by paths such as {@code max_batch_size},
 * {@code input[1].dims[0]} or {@code dynamic_batching.preferred_batch_size[2]}. A path that is not
 * known falls back to its closest known parent, then to the file alone.
 */
public final class SourcePositions {
    private final String source;
    private final Map<String, String> byPath;

    private SourcePositions(String source, Map<String, String> byPath) {
        this.source = requireNonNull(source, "source is null");
        this.byPath = byPath;
    }

    /** Positions that name only the file: for configs that were not parsed from text. */
    public static SourcePositions fileOnly(String source) {
        return new SourcePositions(source, Map.of());
    }

    static SourcePositions of(String source, Message message, TextFormatParseInfoTree tree) {
        Map<String, String> byPath = new HashMap<>();
        walk(source, message, tree, "", byPath, new HashMap<>());
        return new SourcePositions(source, byPath);
    }

    /** The file name alone. */
    public String source() {
        return source;
    }

    /** {@code file:line:col} of {@code path}, or of its closest known parent, or the file name. */
    public String at(String path) {
        String p = path;
        while (!p.isEmpty()) {
            String found = byPath.get(p);
            if (found != null) {
                return found;
            }
            int cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['));
            p = cut < 0 ? "" : p.substring(0, cut);
        }
        return source;
    }

    /**
     * Records the positions of the fields set in {@code message}; returns the earliest, or null.
     *
     * <p>The parse-info tree has one location and one nested tree per field <em>statement</em>:
     * {@code input [ {a}, {b} ]} is one statement whose nested tree holds the fields of both
     * elements in order. {@code used} counts, per field, the locations of a shared nested tree that
     * earlier elements already took.
     */
    private static @Nullable TextFormatParseLocation walk(String source, Message message, TextFormatParseInfoTree tree, String prefix,
            Map<String, String> out, Map<FieldDescriptor, Integer> used) {
        TextFormatParseLocation earliest = null;
        boolean shared = used instanceof SharedCursor;
        for (Map.Entry<FieldDescriptor, Object> e : message.getAllFields().entrySet()) {
            FieldDescriptor f = e.getKey();
            String path = prefix + f.getName();
            List<TextFormatParseLocation> locations = tree.getLocations(f);
            int first = used.getOrDefault(f, 0);
            if (first >= locations.size()) {
                continue;
            }
            boolean isMessage = f.getJavaType() == FieldDescriptor.JavaType.MESSAGE;
            int statements = !f.isRepeated() || shared ? 1 : locations.size() - first;
            used.put(f, first + statements);
            earliest = earlier(earliest, locations.get(first));
            out.put(path, format(source, locations.get(first)));
            if (!f.isRepeated()) {
                if (isMessage && first < tree.getNestedTrees(f).size()) {
                    walk(source, (Message) e.getValue(), tree.getNestedTree(f, first), path + ".", out, new HashMap<>());
                }
                continue;
            }
            if (f.isMapField()) {
                // Map entries come back in map order, not parse order; only the field itself is located.
                continue;
            }
            List<?> values = (List<?>) e.getValue();
            if (!isMessage) {
                if (statements == values.size()) {
                    for (int i = 0; i < values.size(); i++) {
                        out.put(path + "[" + i + "]", format(source, locations.get(first + i)));
                    }
                }
                continue;
            }
            int statement = first;
            Map<FieldDescriptor, Integer> cursor = new SharedCursor();
            for (int i = 0; i < values.size() && statement < first + statements && statement < tree.getNestedTrees(f).size(); i++) {
                Message element = (Message) values.get(i);
                TextFormatParseInfoTree nested = tree.getNestedTree(f, statement);
                if (statements == values.size()) {
                    cursor = new HashMap<>();
                    nested = tree.getNestedTree(f, first + i);
                } else if (i > 0 && !fits(element, nested, cursor) && statement + 1 < first + statements) {
                    statement++;
                    nested = tree.getNestedTree(f, statement);
                    cursor = new SharedCursor();
                }
                String indexed = path + "[" + i + "]";
                TextFormatParseLocation inner = walk(source, element, nested, indexed + ".", out, cursor);
                TextFormatParseLocation at = statements == values.size() ? locations.get(first + i) : inner;
                if (at != null) {
                    out.put(indexed, format(source, at));
                }
            }
        }
        return earliest;
    }

    /** Whether the next unused locations of {@code nested} can belong to {@code element}. */
    private static boolean fits(Message element, TextFormatParseInfoTree nested, Map<FieldDescriptor, Integer> cursor) {
        for (FieldDescriptor f : element.getAllFields().keySet()) {
            return nested.getLocations(f).size() > cursor.getOrDefault(f, 0);
        }
        return false;
    }

    /** Cursor over a nested tree that several list elements may share. */
    private static final class SharedCursor extends HashMap<FieldDescriptor, Integer> {
        private static final long serialVersionUID = 1L;
    }

    private static TextFormatParseLocation earlier(@Nullable TextFormatParseLocation a, TextFormatParseLocation b) {
        if (a == null) {
            return b;
        }
        return a.getLine() < b.getLine() || (a.getLine() == b.getLine() && a.getColumn() <= b.getColumn()) ? a : b;
    }

    private static String format(String source, TextFormatParseLocation l) {
        // TextFormatParseLocation is zero-based; editors and ParseException are one-based.
        return source + ":" + (l.getLine() + 1) + ":" + (l.getColumn() + 1);
    }
}
