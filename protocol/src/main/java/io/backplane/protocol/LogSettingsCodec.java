package io.backplane.protocol;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.host.LogControl;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Triton's logging extension settings by name, shared by both frontends: {@code log_file}
 * (string), {@code log_info}, {@code log_warning}, {@code log_error} (booleans),
 * {@code log_verbose_level} (unsigned integer), {@code log_format} (string). An unknown name or a
 * value of the wrong type is an INVALID_ARGUMENT naming it.
 */
public final class LogSettingsCodec {
    public static final String FILE = "log_file";
    public static final String INFO = "log_info";
    public static final String WARNING = "log_warning";
    public static final String ERROR = "log_error";
    public static final String VERBOSE = "log_verbose_level";
    public static final String FORMAT = "log_format";
    /** Every setting, in Triton's order. */
    public static final List<String> NAMES = List.of(FILE, INFO, WARNING, ERROR, VERBOSE, FORMAT);

    private LogSettingsCodec() {
    }

    /** The settings by name: String, Boolean or Integer values. */
    public static Map<String, Object> toMap(LogControl.Settings s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(FILE, s.file());
        m.put(INFO, s.info());
        m.put(WARNING, s.warning());
        m.put(ERROR, s.error());
        m.put(VERBOSE, s.verboseLevel());
        m.put(FORMAT, s.format());
        return m;
    }

    /**
     * {@code current} with {@code changes} applied. Values: String for the strings, Boolean for
     * the flags, any integral Number for the verbose level.
     */
    public static LogControl.Settings merge(LogControl.Settings current, Map<String, ?> changes) {
        String file = current.file();
        boolean info = current.info();
        boolean warning = current.warning();
        boolean error = current.error();
        int verbose = current.verboseLevel();
        String format = current.format();
        for (Map.Entry<String, ?> e : changes.entrySet()) {
            String k = e.getKey();
            Object v = e.getValue();
            switch (k) {
                case FILE -> file = string(k, v);
                case FORMAT -> format = string(k, v);
                case INFO -> info = bool(k, v);
                case WARNING -> warning = bool(k, v);
                case ERROR -> error = bool(k, v);
                case VERBOSE -> {
                    if (!(v instanceof Integer || v instanceof Long) || ((Number) v).longValue() < 0 || ((Number) v).longValue() > Integer.MAX_VALUE) {
                        throw BackplaneException.invalid("log setting '" + k + "' must be an unsigned integer, not " + v);
                    }
                    verbose = ((Number) v).intValue();
                }
                default -> throw BackplaneException.invalid("unknown log setting '" + k + "'; the settings are " + NAMES);
            }
        }
        return new LogControl.Settings(file, info, warning, error, verbose, format);
    }

    private static String string(String k, Object v) {
        if (!(v instanceof String s)) {
            throw BackplaneException.invalid("log setting '" + k + "' must be a string, not " + v);
        }
        return s;
    }

    private static boolean bool(String k, Object v) {
        if (!(v instanceof Boolean b)) {
            throw BackplaneException.invalid("log setting '" + k + "' must be true or false, not " + v);
        }
        return b;
    }
}
