package io.backplane.backend.python;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Learns that a process ended without its parent's help (<b>P11</b>): a Linux pidfd
 * ({@code pidfd_open(2)}) of a process that is not the JVM's child becomes readable the moment the
 * process has exited, zombie included, so a forked stub whose parent (the stub template) is stopped,
 * hung or dead is still known dead at once. A zombie holds no memory any more: that is the
 * confirmation the quarantine rule (P4) waits for. Its exit status is read from
 * {@code /proc/<pid>/stat} (field 52, the status as {@code waitpid(2)} gives it), which a zombie
 * keeps until its parent reaps it; once it is reaped nobody but the parent knows it.
 *
 * <p>One daemon thread polls every watched pidfd and an eventfd that wakes it for new ones; it exits
 * when nothing is watched, so a closed host leaves no thread. Where pidfds are not available (not
 * Linux x86-64/aarch64, a kernel before 5.3, native access denied) {@link #watch} returns empty and
 * the caller keeps its old way.
 */
final class PidWatch {
    private static final Logger log = LoggerFactory.getLogger(PidWatch.class);
    private static final long SYS_PIDFD_OPEN = 434; // the same number on x86-64 and aarch64 (the unified table)
    private static final int POLLIN = 1;
    private static final int EFD_CLOEXEC = 0x80000;
    private static final int EFD_NONBLOCK = 0x800;
    private static final @Nullable Natives NATIVES = Natives.lookUp();

    private record Natives(MethodHandle syscall, MethodHandle poll, MethodHandle eventfd, MethodHandle read, MethodHandle write,
            MethodHandle close) {
        @SuppressWarnings("restricted")
        static @Nullable Natives lookUp() {
            String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
            boolean linux = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux");
            if (!linux || !(arch.equals("amd64") || arch.equals("x86_64") || arch.equals("aarch64")) || Boolean.getBoolean("backplane.python.noPidfd")) {
                return null;
            }
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                ValueLayout.OfInt i = ValueLayout.JAVA_INT;
                ValueLayout.OfLong l = ValueLayout.JAVA_LONG;
                Natives n = new Natives(
                        linker.downcallHandle(libc.find("syscall").orElseThrow(), FunctionDescriptor.of(l, l, i, i), Linker.Option.firstVariadicArg(1)),
                        linker.downcallHandle(libc.find("poll").orElseThrow(), FunctionDescriptor.of(i, ValueLayout.ADDRESS, l, i)),
                        linker.downcallHandle(libc.find("eventfd").orElseThrow(), FunctionDescriptor.of(i, i, i)),
                        linker.downcallHandle(libc.find("read").orElseThrow(), FunctionDescriptor.of(l, i, ValueLayout.ADDRESS, l)),
                        linker.downcallHandle(libc.find("write").orElseThrow(), FunctionDescriptor.of(l, i, ValueLayout.ADDRESS, l)),
                        linker.downcallHandle(libc.find("close").orElseThrow(), FunctionDescriptor.of(i, i)));
                // probe: the JVM's own pid (a kernel without pidfd_open answers ENOSYS)
                int fd = (int) (long) n.syscall.invokeExact(SYS_PIDFD_OPEN, (int) ProcessHandle.current().pid(), 0);
                if (fd < 0) {
                    log.debug("no pidfd_open on this kernel: a forked stub's death is learned from its template");
                    return null;
                }
                int ignored = (int) n.close.invokeExact(fd);
                return n;
            } catch (Throwable e) { // IllegalCallerException where native access is denied
                log.debug("no pidfd watch ({}): a forked stub's death is learned from its template", e.toString());
                return null;
            }
        }
    }

    private static final Object LOCK = new Object();
    private static final Map<Integer, Watched> WATCHED = new LinkedHashMap<>(); // pidfd -> its watch; guarded by LOCK
    private static @Nullable Thread poller; // guarded by LOCK
    private static int wakeFd = -1; // guarded by LOCK

    private record Watched(long pid, CompletableFuture<ExitStatus> exit) {
    }

    private PidWatch() {
    }

    static boolean available() {
        return NATIVES != null;
    }

    /**
     * Watches {@code pid} (a process that is not necessarily the JVM's child): the future completes
     * once it has exited, with its status while its zombie could still be read, else
     * {@link ExitStatus#UNKNOWN}. Empty when pidfds are not available or the process is gone already.
     */
    static Optional<CompletableFuture<ExitStatus>> watch(long pid) {
        Natives n = NATIVES;
        if (n == null) {
            return Optional.empty();
        }
        int fd;
        try {
            fd = (int) (long) n.syscall.invokeExact(SYS_PIDFD_OPEN, (int) pid, 0);
        } catch (Throwable e) {
            log.debug("pidfd_open({}) failed", pid, e);
            return Optional.empty();
        }
        if (fd < 0) {
            return Optional.empty(); // ESRCH: gone (and reaped) already
        }
        CompletableFuture<ExitStatus> exit = new CompletableFuture<>();
        synchronized (LOCK) {
            WATCHED.put(fd, new Watched(pid, exit));
            if (poller == null) {
                try {
                    wakeFd = (int) n.eventfd.invokeExact(0, EFD_CLOEXEC | EFD_NONBLOCK);
                } catch (Throwable e) {
                    wakeFd = -1;
                }
                Thread t = Thread.ofPlatform().daemon().name("backplane-python-pidwatch").unstarted(() -> pollLoop(n));
                poller = t;
                t.start();
            } else {
                wake(n);
            }
        }
        return Optional.of(exit);
    }

    /** Threads watching now (tests: none once nothing is watched). */
    static boolean polling() {
        synchronized (LOCK) {
            return poller != null;
        }
    }

    private static void wake(Natives n) {
        if (wakeFd < 0) {
            return;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment one = a.allocate(ValueLayout.JAVA_LONG);
            one.set(ValueLayout.JAVA_LONG, 0, 1L);
            long ignored = (long) n.write.invokeExact(wakeFd, one, 8L);
        } catch (Throwable e) {
            log.debug("pidfd watch: wake-up failed", e);
        }
    }

    private static void pollLoop(Natives n) {
        try (Arena threadArena = Arena.ofConfined()) {
            MemorySegment scratch = threadArena.allocate(8, 8);
            while (true) {
                int[] fds;
                int wake;
                synchronized (LOCK) {
                    if (WATCHED.isEmpty()) {
                        closeFd(n, wakeFd);
                        wakeFd = -1;
                        poller = null;
                        return;
                    }
                    fds = WATCHED.keySet().stream().mapToInt(Integer::intValue).toArray();
                    wake = wakeFd;
                }
                // an arena per round: one that lived as long as the thread would keep every round's array
                try (Arena round = Arena.ofConfined()) {
                    pollOnce(n, round, fds, wake, scratch);
                }
            }
        } catch (Throwable e) {
            log.error("pidfd watch failed; forked stubs' deaths are learned from their template from now on", e);
            List<Watched> left;
            synchronized (LOCK) {
                left = new ArrayList<>(WATCHED.values());
                WATCHED.keySet().forEach(fd -> closeFd(n, fd));
                WATCHED.clear();
                poller = null;
            }
            left.forEach(w -> w.exit.completeExceptionally(e));
        }
    }

    /** One poll over {@code fds} and the wake-up descriptor; completes the watches of the processes that ended. */
    private static void pollOnce(Natives n, Arena arena, int[] fds, int wake, MemorySegment scratch) throws Throwable {
        int count = fds.length + (wake >= 0 ? 1 : 0);
        MemorySegment pfds = arena.allocate(8L * count, 8);
        for (int k = 0; k < fds.length; k++) {
            pfds.set(ValueLayout.JAVA_INT, 8L * k, fds[k]);
            pfds.set(ValueLayout.JAVA_SHORT, 8L * k + 4, (short) POLLIN);
        }
        if (wake >= 0) {
            pfds.set(ValueLayout.JAVA_INT, 8L * fds.length, wake);
            pfds.set(ValueLayout.JAVA_SHORT, 8L * fds.length + 4, (short) POLLIN);
        }
        // without an eventfd (it failed), wake every 100 ms to pick up new pidfds
        int ready = (int) n.poll.invokeExact(pfds, (long) count, wake >= 0 ? -1 : 100);
        if (ready <= 0) {
            return; // EINTR, or the fallback's time-out
        }
        if (wake >= 0 && pfds.get(ValueLayout.JAVA_SHORT, 8L * fds.length + 6) != 0) {
            long ignored = (long) n.read.invokeExact(wake, scratch, 8L);
        }
        List<Watched> ended = new ArrayList<>();
        for (int k = 0; k < fds.length; k++) {
            if (pfds.get(ValueLayout.JAVA_SHORT, 8L * k + 6) != 0) {
                synchronized (LOCK) {
                    Watched w = WATCHED.remove(fds[k]);
                    if (w != null) {
                        ended.add(w);
                    }
                }
                closeFd(n, fds[k]);
            }
        }
        for (Watched w : ended) {
            w.exit.complete(zombieStatus(w.pid));
        }
    }

    private static void closeFd(Natives n, int fd) {
        if (fd < 0) {
            return;
        }
        try {
            int ignored = (int) n.close.invokeExact(fd);
        } catch (Throwable e) {
            log.debug("close({}) failed", fd, e);
        }
    }

    /** The status a zombie keeps in {@code /proc/<pid>/stat}, or UNKNOWN once it is reaped (or the field is not readable). */
    static ExitStatus zombieStatus(long pid) {
        try {
            String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            // f[0] is field 3 (state); field 52 (exit_code) is f[49]
            if (f.length > 49 && (f[0].equals("Z") || f[0].equals("X"))) {
                return ExitStatus.ofWaitStatus(Integer.parseInt(f[49].trim()));
            }
        } catch (NoSuchFileException e) {
            // reaped already: only its parent knew the status
        } catch (IOException | RuntimeException e) {
            log.debug("cannot read the exit status of {}", pid, e);
        }
        return ExitStatus.UNKNOWN;
    }
}
