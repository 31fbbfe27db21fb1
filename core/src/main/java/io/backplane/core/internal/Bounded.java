package io.backplane.core.internal;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a call into plugin code (a close, a finalize) with a bound on how long the caller waits,
 * so that one hung backend cannot stall an unload or a host close past its deadline. A call that
 * outlives its bound keeps running on its own daemon thread and is logged.
 */
final class Bounded {
    private static final Logger log = LoggerFactory.getLogger(Bounded.class);

    private Bounded() {
    }

    /** Runs {@code call}; returns false when it threw or did not finish within {@code limit}. */
    static boolean run(String what, Duration limit, Runnable call) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().daemon().name("backplane-close-" + what).unstarted(() -> {
            try {
                call.run();
                done.complete(null);
            } catch (Throwable e) {
                done.completeExceptionally(e);
            }
        });
        t.start();
        try {
            done.get(Math.max(1, limit.toMillis()), TimeUnit.MILLISECONDS);
            return true;
        } catch (ExecutionException e) {
            log.warn("{} failed", what, e.getCause());
            return false;
        } catch (TimeoutException e) {
            log.error("{} did not finish within {} ms; abandoning it (its thread '{}' keeps running)", what, limit.toMillis(), t.getName());
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
