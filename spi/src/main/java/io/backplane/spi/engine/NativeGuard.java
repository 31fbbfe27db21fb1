package io.backplane.spi.engine;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import org.jspecify.annotations.Nullable;

/**
 * Frees an instance's native engine state (a session, a module, a booster) exactly once, and never
 * while a thread is still inside it.
 *
 * <p>The core may call {@code ModelInstance.close()} while an {@code execute} it abandoned at its
 * unload deadline is still inside native code (DESIGN L7): freeing the engine then would crash the
 * process. Every use of the native state happens inside an {@link Entry}; {@link #close()} frees
 * the state at once when no entry is open, else asks the engine to stop ({@link #onInterrupt}, when
 * the engine has a way) and leaves the freeing to the last entry to close. Entries opened after
 * {@code close()} are refused with UNAVAILABLE, so a late {@code execute} ends its requests with an
 * error instead of touching freed memory.
 *
 * <pre>{@code
 * NativeGuard guard = new NativeGuard("model 'm' instance 0", session::close).onInterrupt(() -> runOptions.setTerminate(true));
 * try (NativeGuard.Entry _ = guard.enter()) { session.run(...); }
 * guard.close();
 * }</pre>
 *
 * <p>Thread-safe. The interrupt runs on the thread that calls {@code close()}, and holds the state
 * as an entry does, so the state is never freed while it runs; {@code release} runs on the thread
 * that calls {@code close()} or closes the last entry (possibly the interrupt's); an exception they throw propagates to that caller, and the state counts as
 * released all the same (it is never released twice).
 */
public final class NativeGuard implements AutoCloseable {
    private final String where;
    private final Runnable release;
    private @Nullable Runnable interrupt;
    private int open;
    private boolean closed;
    private boolean released;

    /**
     * @param where names the instance in errors, e.g. {@code "model 'm' instance 0"}
     * @param release frees the native state; called exactly once
     */
    public NativeGuard(String where, Runnable release) {
        this.where = requireNonNull(where, "where is null");
        this.release = requireNonNull(release, "release is null");
    }

    /** What {@link #close()} runs, once, when entries are still open: a way to make the engine return early. Returns this guard. */
    public synchronized NativeGuard onInterrupt(Runnable interrupt) {
        this.interrupt = requireNonNull(interrupt, "interrupt is null");
        return this;
    }

    /**
     * Opens an entry: the native state stays alive until it is closed.
     *
     * @throws BackplaneException UNAVAILABLE once {@link #close()} was called
     */
    public synchronized Entry enter() {
        if (closed) {
            throw BackplaneException.unavailable(where + " is closed");
        }
        open++;
        return new Entry() {
            private boolean done;

            @Override
            public void close() {
                synchronized (NativeGuard.this) {
                    if (done) {
                        return;
                    }
                    done = true;
                }
                exit();
            }
        };
    }

    /** Whether {@link #close()} was called (the state may still be in use by open entries). */
    public synchronized boolean isClosed() {
        return closed;
    }

    /** Whether the native state has been freed. */
    public synchronized boolean isReleased() {
        return released;
    }

    /** Closes the guard: frees the state now, or when the last open entry closes. Idempotent. */
    @Override
    public void close() {
        Runnable stop;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            if (open == 0) {
                released = true;
                stop = null;
            } else {
                stop = interrupt;
                if (stop == null) {
                    return; // the last entry to close releases
                }
                open++; // the interrupt holds the state like an entry: it never runs on freed state
            }
        }
        if (stop == null) {
            release.run();
            return;
        }
        try {
            stop.run();
        } finally {
            exit();
        }
    }

    private void exit() {
        synchronized (this) {
            open--;
            if (!closed || open > 0 || released) {
                return;
            }
            released = true;
        }
        release.run();
    }

    /** An open use of the native state; close it in a finally block or try-with-resources (closing it again does nothing). */
    public interface Entry extends AutoCloseable {
        @Override
        void close();
    }
}
