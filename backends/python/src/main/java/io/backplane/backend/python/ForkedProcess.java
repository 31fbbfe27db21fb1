package io.backplane.backend.python;

import java.io.InputStream;
import java.io.OutputStream;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * A stub forked by a {@link StubTemplate}: a real process, but the template's child, not the JVM's.
 * The supervisor sees it through the same {@link Process} API as a spawned stub: its pid, its
 * stdout and stderr (two socket connections the child made at birth), its exit (reported by the
 * template, which reaps it, with the status {@link Process} would give: the code, or 128 + the
 * signal), and its kill ({@link ProcessHandle}, which checks the pid's start time, so a reused pid
 * is never hit).
 *
 * <p>Its death is confirmed without the template's word (<b>P11</b>): a {@link PidWatch} pidfd
 * reports the exit the moment it happens, zombie included, with the status the zombie keeps, so a
 * stopped, hung or dead template never delays it. Whichever comes first, the template's report or
 * the pidfd's, completes the exit; when neither can tell the status ({@link ExitStatus#UNKNOWN}: the
 * zombie was reaped by a template that then said nothing), the exit says so, never a made-up code.
 * Without pidfds, a template that is gone hands its children to {@link ProcessHandle#onExit()}
 * (the JDK polls a process that is not its child).
 *
 * <p>When it ends, however it ends, its {@link ProcessGroup} is killed too, and
 * {@link #destroyForcibly()} kills the group along with it: what the model started does not outlive
 * the stub.
 */
final class ForkedProcess extends Process {
    /** How long a pidfd's report of a reaped child waits for the template's status before it says "unknown". */
    private static final long REPORT_GRACE_MILLIS = 1000;

    private final long pid;
    private final @Nullable ProcessHandle handle;
    private final ProcessGroup group;
    private final CompletableFuture<ExitStatus> exit = new CompletableFuture<>();
    private volatile @Nullable InputStream stdout;
    private volatile @Nullable InputStream stderr;
    private volatile boolean orphaned;
    /** Whether a pidfd watches it (its exit is then known without the template). */
    private final boolean watched;

    ForkedProcess(long pid) {
        this.pid = pid;
        // Taken at once: the template reaps an exited child, after which the pid may be reused.
        this.handle = ProcessHandle.of(pid).orElse(null);
        this.group = ProcessGroup.of(pid, handle == null ? null : handle.info().startInstant().orElse(null));
        // whatever ends it (a kill, a crash, its own exit), what it started goes with it
        exit.whenComplete((status, failure) -> group.kill());
        var watch = PidWatch.watch(pid);
        this.watched = watch.isPresent();
        watch.ifPresent(w -> w.whenComplete((status, failure) -> {
            if (status != null && status.known()) {
                exit.complete(status);
            } else {
                // reaped by the template just now (its report is on the way), or the watch failed
                // completed on the JDK's delay-scheduler thread (delayedExecutor would start a common-pool worker)
                exit.completeOnTimeout(ExitStatus.UNKNOWN, REPORT_GRACE_MILLIS, java.util.concurrent.TimeUnit.MILLISECONDS);
            }
        }));
    }

    void streams(InputStream out, InputStream err) {
        this.stdout = out;
        this.stderr = err;
    }

    /** The template reaped it with this status. */
    void exited(ExitStatus status) {
        exit.complete(status);
    }

    /** How it ended; null while it runs. */
    @Nullable ExitStatus status() {
        return exit.getNow(null);
    }

    /** Whether its template went away before it exited. */
    boolean orphaned() {
        return orphaned;
    }

    /** The template went away: without a pidfd, the exit is watched through the process handle from now on. */
    void orphan() {
        orphaned = true;
        ProcessHandle h = handle;
        if (watched) {
            return;
        }
        if (h == null) {
            exit.complete(ExitStatus.UNKNOWN);
        } else {
            h.onExit().thenRun(() -> exit.complete(PidWatch.zombieStatus(pid)));
        }
    }

    @Override
    public OutputStream getOutputStream() {
        return OutputStream.nullOutputStream(); // the stub reads nothing from its stdin but its end of file
    }

    @Override
    public InputStream getInputStream() {
        InputStream s = stdout;
        return s == null ? InputStream.nullInputStream() : s;
    }

    @Override
    public InputStream getErrorStream() {
        InputStream s = stderr;
        return s == null ? InputStream.nullInputStream() : s;
    }

    @Override
    public int waitFor() throws InterruptedException {
        try {
            return exit.get().processValue();
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public boolean waitFor(long timeout, TimeUnit unit) throws InterruptedException {
        try {
            exit.get(timeout, unit);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public int exitValue() {
        ExitStatus status = exit.getNow(null);
        if (status == null) {
            throw new IllegalThreadStateException("process " + pid + " has not exited");
        }
        return status.processValue();
    }

    @Override
    public void destroy() {
        ProcessHandle h = handle;
        if (h != null && !exit.isDone()) {
            h.destroy();
        }
    }

    /** Kills its process group with it (SIGKILL to both; {@link ProcessGroup}): what the stub started ends too. */
    @Override
    public Process destroyForcibly() {
        group.kill();
        ProcessHandle h = handle;
        if (h != null && !exit.isDone()) {
            h.destroyForcibly();
        }
        return this;
    }

    @Override
    public boolean supportsNormalTermination() {
        return true;
    }

    @Override
    public boolean isAlive() {
        return !exit.isDone();
    }

    @Override
    public long pid() {
        return pid;
    }

    @Override
    public ProcessHandle toHandle() {
        ProcessHandle h = handle;
        if (h == null) {
            throw new IllegalStateException("process " + pid + " ended before its handle was taken");
        }
        return h;
    }

    @Override
    public CompletableFuture<Process> onExit() {
        // Callbacks run on the thread that learned of the exit (the pidfd watch, the template's reader, the delay
        // scheduler's for the grace): a stub's clean-up there holds up the others' notices for its duration.
        return exit.thenApply(code -> this);
    }

    /** Its process group (it is the leader: it calls {@code setsid()} first), killed when it ends. */
    ProcessGroup group() {
        return group;
    }

    Optional<ProcessHandle> handle() {
        return Optional.ofNullable(handle);
    }

    @Override
    public String toString() {
        return "ForkedProcess[pid=" + pid + ", exitValue=" + (exit.isDone() ? exit.join().processValue() : "\"not exited\"") + "]";
    }
}
