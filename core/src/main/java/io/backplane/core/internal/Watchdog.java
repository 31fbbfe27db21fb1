package io.backplane.core.internal;

import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * The host's execute watchdog timer: one daemon thread ({@code backplane-watchdog}), started by
 * the first {@code execute} that has a limit and stopped when the host closes (L10). Thread-safe.
 */
final class Watchdog {
    private @Nullable ScheduledThreadPoolExecutor timer;
    private boolean closed;

    /** Runs {@code task} after {@code millis}, unless cancelled first; null once the host closed. */
    synchronized @Nullable ScheduledFuture<?> schedule(Runnable task, long millis) {
        if (closed) {
            return null;
        }
        if (timer == null) {
            ScheduledThreadPoolExecutor w = new ScheduledThreadPoolExecutor(1, r -> Thread.ofPlatform().daemon().name("backplane-watchdog").unstarted(r));
            w.setRemoveOnCancelPolicy(true);
            timer = w;
        }
        return timer.schedule(task, millis, TimeUnit.MILLISECONDS);
    }

    synchronized void close() {
        closed = true;
        if (timer != null) {
            timer.shutdownNow();
            timer = null;
        }
    }
}
