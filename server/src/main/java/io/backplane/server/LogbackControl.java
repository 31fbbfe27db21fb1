package io.backplane.server;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.LogControl;
import java.lang.reflect.Method;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Triton's logging extension over Logback, the distribution's binding, reached by reflection as
 * {@link LogLevels} does (the server compiles against SLF4J only). The settings are the level of
 * Backplane's loggers ({@code io.backplane}): ERROR, WARN, INFO as the three flags, DEBUG for
 * verbose level 1, TRACE for 2 and up, OFF with every flag false. Since a level is a threshold,
 * a flag can be off only when every less severe one is off too (log_info=false needs
 * log_verbose_level=0, …); other combinations, a log file and a format other than
 * {@code default} are refused naming the setting. {@code --log-verbose} changes the same level.
 */
final class LogbackControl implements LogControl {
    private static final String LOGGER = "io.backplane";

    private final Logger logger;
    private final Class<?> levelClass;
    private final Method setLevel;
    private final Method effectiveLevel;

    private LogbackControl(Logger logger, Class<?> levelClass, Method setLevel, Method effectiveLevel) {
        this.logger = logger;
        this.levelClass = levelClass;
        this.setLevel = setLevel;
        this.effectiveLevel = effectiveLevel;
    }

    /** The control, or null when the SLF4J binding is not Logback. */
    static @Nullable LogbackControl detect() {
        Logger l = LoggerFactory.getLogger(LOGGER);
        try {
            Class<?> levelClass = Class.forName("ch.qos.logback.classic.Level", false, l.getClass().getClassLoader());
            return new LogbackControl(l, levelClass, l.getClass().getMethod("setLevel", levelClass), l.getClass().getMethod("getEffectiveLevel"));
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }

    @Override
    public synchronized Settings settings() {
        String level;
        try {
            level = String.valueOf(effectiveLevel.invoke(logger));
        } catch (ReflectiveOperationException e) {
            throw new BackplaneException(ErrorCode.INTERNAL, "cannot read the level of logger " + LOGGER + ": " + e, e);
        }
        return switch (level) {
            case "TRACE" -> new Settings("", true, true, true, 2, "default");
            case "DEBUG" -> new Settings("", true, true, true, 1, "default");
            case "INFO" -> new Settings("", true, true, true, 0, "default");
            case "WARN" -> new Settings("", false, true, true, 0, "default");
            case "ERROR" -> new Settings("", false, false, true, 0, "default");
            default -> new Settings("", false, false, false, 0, "default");
        };
    }

    @Override
    public synchronized Settings update(Settings s) {
        if (!s.file().isEmpty()) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "log setting 'log_file' = '" + s.file()
                    + "': the server logs to its standard streams; redirect them or configure a Logback file appender");
        }
        if (!s.format().equals("default")) {
            throw new BackplaneException(ErrorCode.UNSUPPORTED, "log setting 'log_format' = '" + s.format()
                    + "': only 'default' is served; configure the Logback pattern for another format");
        }
        if (s.verboseLevel() > 0 && !s.info()) {
            throw BackplaneException.invalid("log settings 'log_verbose_level' = " + s.verboseLevel()
                    + " with 'log_info' = false: verbose logging includes INFO (levels are thresholds)");
        }
        if (s.info() && !s.warning()) {
            throw BackplaneException.invalid("log setting 'log_warning' = false with 'log_info' = true: INFO includes WARNING (levels are thresholds)");
        }
        if (s.warning() && !s.error()) {
            throw BackplaneException.invalid("log setting 'log_error' = false with 'log_warning' = true: WARNING includes ERROR (levels are thresholds)");
        }
        String level = s.verboseLevel() >= 2 ? "TRACE" : s.verboseLevel() == 1 ? "DEBUG" : s.info() ? "INFO" : s.warning() ? "WARN"
                : s.error() ? "ERROR" : "OFF";
        try {
            setLevel.invoke(logger, levelClass.getField(level).get(null));
        } catch (ReflectiveOperationException e) {
            throw new BackplaneException(ErrorCode.INTERNAL, "cannot set the level of logger " + LOGGER + " to " + level + ": " + e, e);
        }
        return settings();
    }
}
