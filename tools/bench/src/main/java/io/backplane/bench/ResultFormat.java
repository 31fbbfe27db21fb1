package io.backplane.bench;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The CSV and JSON that every result of the load tool writes: one row per concurrency level. */
final class ResultFormat {
    private ResultFormat() {
    }

    /**
     * A header line of {@code columns}, then one line per row; a missing figure is an empty cell, a
     * double is written with {@code doubleFormat} (e.g. {@code %.1f}), a cell with a comma, quote or
     * newline is quoted.
     */
    static String csv(List<String> columns, List<Map<String, Object>> rows, String doubleFormat) {
        StringBuilder b = new StringBuilder(String.join(",", columns)).append('\n');
        for (Map<String, Object> row : rows) {
            List<String> cells = new ArrayList<>();
            for (String c : columns) {
                Object v = row.get(c);
                String s = v == null ? "" : v instanceof Double d ? String.format(Locale.ROOT, doubleFormat, d) : v.toString();
                cells.add(s.contains(",") || s.contains("\"") || s.contains("\n") ? "\"" + s.replace("\"", "\"\"") + "\"" : s);
            }
            b.append(String.join(",", cells)).append('\n');
        }
        return b.toString();
    }

    /** {@code {<head>…, "levels": [<rows without the head's keys>]}}, indented; a missing figure is null. */
    static String json(Map<String, Object> head, List<Map<String, Object>> rows) {
        Map<String, Object> doc = new LinkedHashMap<>(head);
        rows.forEach(r -> r.keySet().removeAll(head.keySet()));
        doc.put("levels", rows);
        try {
            return new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(doc) + "\n";
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write the result as JSON", e);
        }
    }
}
