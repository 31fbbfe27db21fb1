package io.backplane.server;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code --log-verbose} and {@code --log-level}: set a logger's level. SLF4J has no API for that,
 * so this works with the distribution's binding, Logback, reached by reflection (the core does not
 * depend on any binding); with another binding it says how to do it in that binding's configuration.
 */
final class LogLevels {
    /** The levels {@code --log-level} takes (Logback's). */
    static final List<String> LEVELS = List.of("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF");

    private LogLevels() {
    }

    /** Undoes a level change. */
    interface Restore extends AutoCloseable {
        @Override
        void close();
    }

    /** Sets {@code logger} to DEBUG (verbosity 1) or TRACE (2+); 0 changes nothing. */
    static Restore verbose(String logger, int verbosity) {
        if (verbosity <= 0) {
            return () -> {
            };
        }
        return set(logger, verbosity == 1 ? "DEBUG" : "TRACE", "--log-verbose");
    }

    /**
     * Sets each logger to its level ({@code --log-level}: a plugin's package, e.g.
     * {@code com.example.mybackend=INFO}, or any other logger); undone together, in reverse order.
     *
     * @param levels logger name → one of {@link #LEVELS}, checked by the caller
     */
    static Restore levels(Map<String, String> levels) {
        List<Restore> done = new ArrayList<>();
        levels.forEach((logger, level) -> done.add(set(logger, level, "--log-level")));
        return () -> {
            for (Restore r : done.reversed()) {
                r.close();
            }
        };
    }

    private static Restore set(String logger, String level, String option) {
        Logger l = LoggerFactory.getLogger(logger);
        try {
            Class<?> levelClass = Class.forName("ch.qos.logback.classic.Level", false, l.getClass().getClassLoader());
            Method set = l.getClass().getMethod("setLevel", levelClass);
            Method get = l.getClass().getMethod("getLevel");
            Object previous = get.invoke(l);
            set.invoke(l, levelClass.getField(level).get(null));
            l.debug("{} logging at {}", logger, level);
            return () -> {
                try {
                    set.invoke(l, previous);
                } catch (ReflectiveOperationException e) {
                    l.warn("could not restore the log level of {}: {}", logger, e.toString());
                }
            };
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            l.warn("{} works with the Logback binding; with {} set the level of '{}' to {} in its configuration", option,
                    LoggerFactory.getILoggerFactory().getClass().getName(), logger, level);
            return () -> {
            };
        }
    }
}
