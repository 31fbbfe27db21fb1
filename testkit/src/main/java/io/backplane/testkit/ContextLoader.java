package io.backplane.testkit;

/**
 * Swaps the thread context class loader for the duration of a try-with-resources block, so that
 * the kit calls a backend under the backend's own class loader, as the host does.
 */
final class ContextLoader implements AutoCloseable {
    private final Thread thread;
    private final ClassLoader previous;

    private ContextLoader(ClassLoader loader) {
        this.thread = Thread.currentThread();
        this.previous = thread.getContextClassLoader();
        thread.setContextClassLoader(loader);
    }

    static ContextLoader swap(ClassLoader loader) {
        return new ContextLoader(loader);
    }

    /** The loader of {@code o}'s class, or the system loader for a bootstrap class. */
    static ClassLoader of(Object o) {
        ClassLoader l = o.getClass().getClassLoader();
        return l != null ? l : ClassLoader.getSystemClassLoader();
    }

    @Override
    public void close() {
        thread.setContextClassLoader(previous);
    }
}
