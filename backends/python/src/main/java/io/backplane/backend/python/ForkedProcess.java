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
 * <p>Once the template is gone its children are no longer reaped by it and report no status; the
 * exit then comes from {@link ProcessHandle#onExit()} (the JDK polls a process that is not its
 * child) with code {@value #UNKNOWN_EXIT}. The stub's control connection reaches end of file at
 * once either way, so the supervisor learns of a death without waiting for the poll.
 */
final class ForkedProcess extends Process {
    /** The exit code when the template that would have reported it is gone. */
    static final int UNKNOWN_EXIT = 255;

    private final long pid;
    private final @Nullable ProcessHandle handle;
    private final CompletableFuture<Integer> exit = new CompletableFuture<>();
    private volatile @Nullable InputStream stdout;
    private volatile @Nullable InputStream stderr;
    private volatile boolean orphaned;

    ForkedProcess(long pid) {
        this.pid = pid;
        // Taken at once: the template reaps an exited child, after which the pid may be reused.
        this.handle = ProcessHandle.of(pid).orElse(null);
    }

    void streams(InputStream out, InputStream err) {
        this.stdout = out;
        this.stderr = err;
    }

    /** The template reaped it with this code (or its handle's exit when the template is gone). */
    void exited(int code) {
        exit.complete(code);
    }

    /** Whether its template went away before it exited (its exit code then reads {@value #UNKNOWN_EXIT}). */
    boolean orphaned() {
        return orphaned;
    }

    /** The template went away: the exit is watched through the process handle from now on. */
    void orphan() {
        orphaned = true;
        ProcessHandle h = handle;
        if (h == null) {
            exit.complete(UNKNOWN_EXIT);
        } else {
            h.onExit().thenRun(() -> exit.complete(UNKNOWN_EXIT));
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
            return exit.get();
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
        Integer code = exit.getNow(null);
        if (code == null) {
            throw new IllegalThreadStateException("process " + pid + " has not exited");
        }
        return code;
    }

    @Override
    public void destroy() {
        ProcessHandle h = handle;
        if (h != null && !exit.isDone()) {
            h.destroy();
        }
    }

    @Override
    public Process destroyForcibly() {
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
        return exit.thenApply(code -> this);
    }

    Optional<ProcessHandle> handle() {
        return Optional.ofNullable(handle);
    }

    @Override
    public String toString() {
        return "ForkedProcess[pid=" + pid + ", exitValue=" + (exit.isDone() ? exit.join() : "\"not exited\"") + "]";
    }
}
