package io.backplane.backend.python;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process group of a python stub (or of a process started like one: a template, an
 * {@code auto_complete_config} run), killed as a whole when the stub ends, so that what the model
 * started ({@code subprocess.Popen}, {@code multiprocessing} workers, a forked child, and their own
 * children) does not outlive it (<b>R3</b>). Every such process makes itself the leader of a
 * session and process group of its own first thing ({@code setsid()} at the top of
 * {@code backplane_stub.py}, in {@code backplane_template.py}'s {@code _child}), so the group's id
 * is the stub's pid, and the group holds the stub and whatever it started that did not leave it
 * (a process that calls {@code setsid()} or {@code setpgid()} itself, a daemon, leaves it and is not
 * reached).
 *
 * <p><b>Pid reuse.</b> {@link #kill} sends {@code kill(-pgid, SIGKILL)} only when the number is
 * still the stub's: the start instant of the leader is recorded when the group is made (while the
 * stub surely runs), and at kill time the signal is sent only if
 * <ul>
 *   <li>a process with pid == pgid exists and has that same start instant: it is the stub itself
 *       (alive, or a zombie not reaped yet), and its group is its own; or
 *   <li>no process with pid == pgid exists: the leader is gone. Linux keeps a pid number allocated
 *       as long as any process uses it as its pid, process group id or session id, so while any
 *       member of the stub's group lives the number cannot be given to a new process, and a group
 *       with that id is the stub's. Once the group is empty, {@code kill} answers {@code ESRCH}
 *       (harmless) and this object never signals again.
 * </ul>
 * A process with that pid but another start instant (the number was reused after the group had
 * emptied) is never signalled. The one case left is a reuse of the number whose new owner made a
 * group of its own and died too, leaving members, all between the stub's end and this call: it
 * takes a wrap-around of the pid space within that interval, and the calls come at the stub's end.
 *
 * <p>Idempotent and thread-safe: a call after the group was found empty does nothing, and calls
 * while it still has members signal the same processes again (harmless: SIGKILL).
 *
 * <p>Where {@code kill(2)} is not reachable (not Linux or macOS, native access denied, or
 * {@code -Dbackplane.python.noGroupKill=true}) the
 * fallback is best effort: while the leader runs, its descendants
 * ({@link ProcessHandle#descendants()}) are killed with {@link ProcessHandle#destroyForcibly()};
 * after the leader ended its children have been re-parented and are not found any more, so a stub
 * that exited or died by itself leaves what it started.
 */
final class ProcessGroup {
    private static final Logger log = LoggerFactory.getLogger(ProcessGroup.class);
    private static final int SIGKILL = 9;
    private static final int ESRCH = 3;
    private static final @Nullable Natives NATIVES = Natives.lookUp();

    /** What one {@link #kill} call did (tests). */
    enum Outcome {
        /** {@code kill(-pgid, SIGKILL)} reached at least one process. */
        SIGNALLED,
        /** The group is empty (now or at an earlier call): nothing was signalled. */
        EMPTY,
        /** A process holds the number but is not the one recorded (or cannot be told apart): nothing was signalled. */
        NOT_OURS,
        /** No {@code kill(2)} here: the leader's descendants were killed through {@link ProcessHandle}, if it still ran. */
        FALLBACK,
        /** {@code kill} failed otherwise (EPERM: a member runs as another user); logged. */
        FAILED
    }

    private record Natives(MethodHandle kill, StructLayout state, VarHandle errno) {
        @SuppressWarnings("restricted")
        static @Nullable Natives lookUp() {
            String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
            if (!(os.startsWith("linux") || os.startsWith("mac")) || Boolean.getBoolean("backplane.python.noGroupKill")) {
                return null;
            }
            try {
                Linker linker = Linker.nativeLinker();
                MemorySegment fn = linker.defaultLookup().find("kill").orElseThrow();
                StructLayout state = Linker.Option.captureStateLayout();
                MethodHandle h = linker.downcallHandle(fn, FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
                        Linker.Option.captureCallState("errno"));
                VarHandle errno = state.varHandle(java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));
                return new Natives(h, state, errno);
            } catch (RuntimeException e) { // IllegalCallerException where native access is denied, NoSuchElementException
                log.debug("python stubs' process groups are not killed, only their descendants while they run: no kill(2) ({})", e.toString());
                return null;
            }
        }
    }

    private final long pgid;
    private final @Nullable Instant leaderStart;
    private volatile boolean emptied;

    private ProcessGroup(long pgid, @Nullable Instant leaderStart) {
        this.pgid = pgid;
        this.leaderStart = leaderStart;
    }

    /** The group led by {@code pid}: call while the process surely runs (just started, not yet reaped). */
    static ProcessGroup of(long pid) {
        if (pid <= 1) {
            throw new IllegalArgumentException("pid " + pid + " does not lead a stub's process group");
        }
        return new ProcessGroup(pid, ProcessHandle.of(pid).flatMap(h -> h.info().startInstant()).orElse(null));
    }

    /** The group of {@code p}: a forked stub's own ({@link ForkedProcess#group()}), else a new record of its leader. */
    static ProcessGroup of(Process p) {
        return p instanceof ForkedProcess f ? f.group() : of(p.pid());
    }

    /** For tests: a group whose leader is recorded as started at {@code leaderStart}. */
    static ProcessGroup of(long pid, @Nullable Instant leaderStart) {
        return new ProcessGroup(pid, leaderStart);
    }

    /** The groups of running stubs, by the backend (its socket folder) that started them. */
    private static final ConcurrentHashMap<Path, Set<ProcessGroup>> LIVE =
            new ConcurrentHashMap<>();

    /** Records a running stub's group under its backend, so the backend's close reaches it even if the stub's own clean-up never ran. */
    static void track(Path backend, ProcessGroup g) {
        LIVE.computeIfAbsent(backend, k -> ConcurrentHashMap.newKeySet()).add(g);
    }

    /** Forgets a group once its stub ended and the group was killed. */
    static void untrack(Path backend, ProcessGroup g) {
        Set<ProcessGroup> s = LIVE.get(backend);
        if (s != null) {
            s.remove(g);
        }
    }

    /**
     * Kills the groups of every stub of {@code backend} still recorded: stubs whose clean-up did
     * not finish before the backend closed (an instance close abandoned after its deadline, say),
     * which would otherwise end with the host and leave what their model started running.
     *
     * @return how many groups were signalled
     */
    static int killAll(Path backend) {
        Set<ProcessGroup> s = LIVE.remove(backend);
        if (s == null) {
            return 0;
        }
        int signalled = 0;
        for (ProcessGroup g : s) {
            if (g.kill() == Outcome.SIGNALLED) {
                signalled++;
            }
        }
        return signalled;
    }

    /** Whether whole groups are killed here (else the descendants fallback runs). */
    static boolean available() {
        return NATIVES != null;
    }

    long pgid() {
        return pgid;
    }

    /**
     * Kills every process of the group with SIGKILL, its leader included, under the pid-reuse guard
     * above. Never throws, never blocks beyond a look at {@code /proc} and one system call; the
     * processes may still be exiting when it returns.
     */
    Outcome kill() {
        if (emptied) {
            return Outcome.EMPTY;
        }
        Optional<ProcessHandle> leader = ProcessHandle.of(pgid);
        if (leader.isPresent()) {
            Instant now = leader.get().info().startInstant().orElse(null);
            if (leaderStart == null || !leaderStart.equals(now)) {
                log.debug("process group {}: pid {} is another process now (started {}, the stub {}); not signalled", pgid, pgid, now, leaderStart);
                return Outcome.NOT_OURS;
            }
        }
        Natives n = NATIVES;
        if (n == null) {
            leader.ifPresent(h -> h.descendants().forEach(ProcessHandle::destroyForcibly));
            return Outcome.FALLBACK;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(n.state());
            int rc = (int) n.kill().invokeExact(state, (int) -pgid, SIGKILL);
            if (rc == 0) {
                log.debug("process group {} killed", pgid);
                return Outcome.SIGNALLED;
            }
            int errno = (int) n.errno().get(state, 0L);
            if (errno == ESRCH) {
                if (leader.isEmpty()) {
                    emptied = true; // leader gone and no member left: the number is free from now on, never signal it again
                }
                return Outcome.EMPTY; // or the leader has not made its group yet (between its start and its setsid())
            }
            log.warn("process group {} of a python stub: kill failed (errno {}); what the model started may live on", pgid, errno);
            return Outcome.FAILED;
        } catch (Throwable t) {
            log.warn("process group {} of a python stub: kill failed; what the model started may live on", pgid, t);
            return Outcome.FAILED;
        }
    }

    @Override
    public String toString() {
        return "ProcessGroup[" + pgid + (emptied ? ", empty" : "") + "]";
    }
}
