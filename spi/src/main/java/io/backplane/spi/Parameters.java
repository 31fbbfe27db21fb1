package io.backplane.spi;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Checks request and response parameter maps: the Open Inference Protocol allows string,
 * integer, boolean and floating-point values only.
 */
final class Parameters {
    private Parameters() {
    }

    static Map<String, Object> copy(Map<String, ?> params, String owner) {
        Map<String, Object> out = new LinkedHashMap<>();
        params.forEach((k, v) -> {
            if (k == null || v == null) {
                throw BackplaneException.invalid(owner + ": parameter '" + k + "' has a null key or value");
            }
            if (!(v instanceof String || v instanceof Long || v instanceof Integer || v instanceof Boolean || v instanceof Double)) {
                throw BackplaneException.invalid(owner + ": parameter '" + k + "' has type " + v.getClass().getSimpleName()
                        + "; use String, Long, Integer, Boolean or Double");
            }
            out.put(k, v instanceof Integer i ? Long.valueOf(i) : v);
        });
        return java.util.Collections.unmodifiableMap(out);
    }
}
