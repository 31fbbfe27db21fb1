package io.backplane.server;

import java.lang.reflect.Method;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code --log-verbose}: raises a logger's level. SLF4J has no API for that, so this works with
 * the distribution's binding, Logback, reached by reflection (the core does not depend on any
 * binding); with another binding it says how to do it in that binding's configuration.
 */
final class LogLevels {
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
        Logger l = LoggerFactory.getLogger(logger);
        String level = verbosity == 1 ? "DEBUG" : "TRACE";
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
            l.warn("--log-verbose works with the Logback binding; with {} set the level of '{}' to {} in its configuration",
                    LoggerFactory.getILoggerFactory().getClass().getName(), logger, level);
            return () -> {
            };
        }
    }
}
