package io.backplane.backend.python;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Linux futexes on words of the shared control block: the host and a stub sleep on, and wake each
 * other through, the very sequence word that carries the hand-off, with one system call on each
 * side and no thread in between (the socket's WAKE frames cost a reader thread's wake-up on each
 * side as well). The futexes are shared (not {@code FUTEX_PRIVATE}): the block is a file mapping
 * in both processes.
 *
 * <p>Available on Linux x86-64 and aarch64 when the JVM allows native access to this code
 * ({@code --enable-native-access}); elsewhere {@link #available()} is false and the connection
 * keeps the socket's WAKE frames. Thread-safe; stateless apart from the looked-up handle.
 */
final class Futex {
    private static final Logger log = LoggerFactory.getLogger(Futex.class);
    private static final int FUTEX_WAIT = 0;
    private static final int FUTEX_WAKE = 1;
    private static final @Nullable MethodHandle SYSCALL;
    private static final long SYS_FUTEX;

    static {
        MethodHandle h = null;
        long nr = -1;
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        boolean linux = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux");
        if (linux && (arch.equals("amd64") || arch.equals("x86_64"))) {
            nr = 202;
        } else if (linux && arch.equals("aarch64")) {
            nr = 98;
        }
        if (nr > 0 && !Boolean.getBoolean("backplane.python.noFutex")) {
            try {
                h = lookUp();
            } catch (RuntimeException e) { // IllegalCallerException where native access is denied
                log.debug("python stub wake-ups use the socket: no futex ({})", e.toString());
                h = null;
            }
        }
        SYSCALL = h;
        SYS_FUTEX = nr;
    }

    /** Tests: new connections use the socket's WAKE frames even where futexes work. */
    static volatile boolean socketOnly;

    private Futex() {
    }

    @SuppressWarnings("restricted")
    private static MethodHandle lookUp() {
        Linker linker = Linker.nativeLinker();
        MemorySegment fn = linker.defaultLookup().find("syscall").orElseThrow();
        return linker.downcallHandle(fn, FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS,
                ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS), Linker.Option.firstVariadicArg(1));
    }

    /** Whether futex wake-ups can be used from this JVM. */
    static boolean available() {
        return SYSCALL != null && !socketOnly;
    }

    /** A timeout for {@link #await}, {@code millis} long, valid as long as {@code arena}. */
    static MemorySegment timeout(Arena arena, long millis) {
        MemorySegment ts = arena.allocate(16, 8);
        ts.set(ValueLayout.JAVA_LONG, 0, millis / 1000);
        ts.set(ValueLayout.JAVA_LONG, 8, (millis % 1000) * 1_000_000L);
        return ts;
    }

    /**
     * Sleeps while the 32-bit word at {@code word} equals {@code expected}, at most for
     * {@code timeout}; returns at once when it differs already. Spurious returns are allowed: the
     * caller re-checks its condition.
     */
    static void await(MemorySegment word, int expected, MemorySegment timeout) {
        MethodHandle h = SYSCALL;
        if (h == null) {
            throw new IllegalStateException("no futex on this platform");
        }
        try {
            long ignored = (long) h.invokeExact(SYS_FUTEX, word, FUTEX_WAIT, expected, timeout);
        } catch (Throwable t) {
            throw new IllegalStateException("futex wait failed", t);
        }
    }

    /** Wakes every thread (of any process) sleeping on {@code word}. */
    static void wakeAll(MemorySegment word) {
        MethodHandle h = SYSCALL;
        if (h == null) {
            return;
        }
        try {
            long ignored = (long) h.invokeExact(SYS_FUTEX, word, FUTEX_WAKE, Integer.MAX_VALUE, MemorySegment.NULL);
        } catch (Throwable t) {
            throw new IllegalStateException("futex wake failed", t);
        }
    }
}
