package io.backplane.server;

import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/** Option value converters; picocli prefixes their messages with "Invalid value for option '--x': ". */
final class Converters {
    private Converters() {
    }

    /** A TCP port: 1-65535, 0 for any free port, -1 to disable. */
    static final class Port implements ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            int p = integer(value, "a port number");
            if (p < -1 || p > 65535) {
                throw new TypeConversionException("'" + value + "' is not a port; use 1-65535, 0 for any free port, or -1 to disable");
            }
            return p;
        }
    }

    /** Whole seconds, at least 0. */
    static final class Seconds implements ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            int s = integer(value, "a number of seconds");
            if (s < 0) {
                throw new TypeConversionException("'" + value + "' is negative; give a number of seconds, 0 or more");
            }
            return s;
        }
    }

    /** Whole seconds, at least 1. */
    static final class PositiveSeconds implements ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            int s = integer(value, "a number of seconds");
            if (s < 1) {
                throw new TypeConversionException("'" + value + "' must be at least 1 (seconds)");
            }
            return s;
        }
    }

    /** A count, at least 0. */
    static final class Count implements ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            int n = integer(value, "a whole number");
            if (n < 0) {
                throw new TypeConversionException("'" + value + "' is negative; give 0 or more");
            }
            return n;
        }
    }

    /** A count, at least 1. */
    static final class PositiveCount implements ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            int n = integer(value, "a whole number");
            if (n < 1) {
                throw new TypeConversionException("'" + value + "' must be at least 1");
            }
            return n;
        }
    }

    /** A number of bytes, at least 1. */
    static final class Bytes implements ITypeConverter<Long> {
        @Override
        public Long convert(String value) {
            long n;
            try {
                n = Long.parseLong(value.strip());
            } catch (NumberFormatException e) {
                throw new TypeConversionException("'" + value + "' is not a number of bytes");
            }
            if (n < 1) {
                throw new TypeConversionException("'" + value + "' must be at least 1 (bytes)");
            }
            return n;
        }
    }

    /** {@code <plugin>,<key>=<value>}, as in Triton's {@code --backend-config=python,shm_initial_bytes=1048576}. */
    static final class PluginSetting implements ITypeConverter<PluginOption> {
        @Override
        public PluginOption convert(String value) {
            int comma = value.indexOf(',');
            int eq = comma < 0 ? -1 : value.indexOf('=', comma);
            if (comma <= 0 || eq < 0 || eq == comma + 1) {
                throw new TypeConversionException("'" + value + "' is not <name>,<key>=<value> (e.g. python,shm_initial_bytes=1048576)");
            }
            String name = value.substring(0, comma).strip();
            String key = value.substring(comma + 1, eq).strip();
            if (name.isEmpty() || key.isEmpty()) {
                throw new TypeConversionException("'" + value + "' is not <name>,<key>=<value> (e.g. python,shm_initial_bytes=1048576)");
            }
            return new PluginOption(name, key, value.substring(eq + 1));
        }
    }

    private static int integer(String value, String what) {
        try {
            return Integer.parseInt(value.strip());
        } catch (NumberFormatException e) {
            throw new TypeConversionException("'" + value + "' is not " + what);
        }
    }

    /** One {@code --backend-config} or {@code --frontend-config} setting. */
    record PluginOption(String name, String key, String value) {
    }
}
