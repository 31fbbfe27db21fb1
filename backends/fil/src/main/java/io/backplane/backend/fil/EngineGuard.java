package io.backplane.backend.fil;

import io.backplane.spi.BackplaneException;

/**
 * Frees a model's engine only when no prediction runs in it: {@link #close()} while an abandoned
 * {@code execute} is still inside the library defers the free to the moment that prediction
 * leaves. (Stands in for the SPI's {@code NativeGuard} until this backend builds against it.)
 */
final class EngineGuard {
    private final String where;
    private final Runnable release;
    private int open;
    private boolean closed;
    private boolean released;

    EngineGuard(String where, Runnable release) {
        this.where = where;
        this.release = release;
    }

    /** Enters before a prediction; the returned entry must be closed once. */
    Entry enter() {
        synchronized (this) {
            if (closed) {
                throw BackplaneException.unavailable(where + " is closed");
            }
            open++;
        }
        return this::exit;
    }

    private void exit() {
        boolean now;
        synchronized (this) {
            open--;
            now = closed && open == 0 && !released;
            released |= now;
        }
        if (now) {
            release.run();
        }
    }

    /** Idempotent: releases now, or when the last open entry exits. */
    void close() {
        boolean now;
        synchronized (this) {
            closed = true;
            now = open == 0 && !released;
            released |= now;
        }
        if (now) {
            release.run();
        }
    }

    interface Entry extends AutoCloseable {
        @Override
        void close();
    }
}
