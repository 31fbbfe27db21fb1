package io.backplane.backend.python;

/**
 * How a stub process ended, as far as the host could learn it: its exit code, the signal that ended
 * it, or neither when nobody could say (a forked stub whose status its parent took with it).
 *
 * @param code the exit code when it exited; -1 otherwise
 * @param signal the signal that ended it; 0 when it exited or the status is unknown
 */
record ExitStatus(int code, int signal) {
    /** The status of a process whose end was seen but whose status nobody reported. */
    static final ExitStatus UNKNOWN = new ExitStatus(-1, 0);

    static ExitStatus exited(int code) {
        return new ExitStatus(code & 0xff, 0);
    }

    static ExitStatus signalled(int signal) {
        return new ExitStatus(-1, signal);
    }

    /** From a status word as {@code waitpid(2)} gives it (and {@code /proc/<pid>/stat} keeps for a zombie). */
    static ExitStatus ofWaitStatus(int status) {
        int sig = status & 0x7f;
        return sig == 0 ? exited((status >> 8) & 0xff) : signalled(sig);
    }

    /** From a {@link Process#exitValue()} of a process the JVM spawned: 128 + the signal where a signal ended it. */
    static ExitStatus ofProcessValue(int value) {
        return value > 128 && value < 128 + 65 ? signalled(value - 128) : exited(value);
    }

    /** How {@code p} ended, truthfully: a forked stub's status as its pidfd or template saw it, a spawned one's as the JDK gives it. */
    static String describe(@org.jspecify.annotations.Nullable Process p) {
        if (p == null) {
            return "never started";
        }
        if (p instanceof ForkedProcess f) {
            ExitStatus s = f.status();
            if (s != null) {
                return s.describe();
            }
        }
        return ofProcessValue(p.exitValue()).describe();
    }

    boolean known() {
        return code >= 0 || signal > 0;
    }

    /** The value {@link Process#exitValue()} gives for it: the code, 128 + the signal, or 255 when unknown. */
    int processValue() {
        return signal > 0 ? 128 + signal : code >= 0 ? code : 255;
    }

    /** "exited with code 1", "was ended by signal 9 (SIGKILL)", or "ended (its exit status is unknown)". */
    String describe() {
        if (signal > 0) {
            return "was ended by signal " + signal + signalName(signal);
        }
        return code >= 0 ? "exited with code " + code : "ended (its exit status is unknown: its parent, the stub template, is gone)";
    }

    private static String signalName(int signal) {
        String name = switch (signal) {
            case 1 -> "SIGHUP";
            case 2 -> "SIGINT";
            case 3 -> "SIGQUIT";
            case 4 -> "SIGILL";
            case 6 -> "SIGABRT";
            case 7 -> "SIGBUS";
            case 8 -> "SIGFPE";
            case 9 -> "SIGKILL";
            case 11 -> "SIGSEGV";
            case 13 -> "SIGPIPE";
            case 14 -> "SIGALRM";
            case 15 -> "SIGTERM";
            default -> "";
        };
        return name.isEmpty() ? "" : " (" + name + ")";
    }
}
