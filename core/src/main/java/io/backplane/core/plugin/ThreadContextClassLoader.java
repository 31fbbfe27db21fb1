package io.backplane.core.plugin;

/** Swaps the thread context class loader for a call into plugin code; restores it on close. */
public final class ThreadContextClassLoader implements AutoCloseable {
    private final Thread thread;
    private final ClassLoader previous;

    private ThreadContextClassLoader(ClassLoader loader) {
        this.thread = Thread.currentThread();
        this.previous = thread.getContextClassLoader();
        thread.setContextClassLoader(loader);
    }

    public static ThreadContextClassLoader swap(ClassLoader loader) {
        return new ThreadContextClassLoader(loader);
    }

    @Override
    public void close() {
        thread.setContextClassLoader(previous);
    }
}
