package io.backplane.core.testing;

import static org.junit.jupiter.api.Assertions.fail;

import java.util.List;

/** After-test checks: nothing Backplane started may still run (L10). */
public final class Hygiene {
    private Hygiene() {
    }

    /** Threads named backplane-* that are still alive. */
    public static List<String> backplaneThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith("backplane-")).sorted().toList();
    }

    /** Fails if any backplane thread is still alive 5 s after close. */
    public static void assertNoBackplaneThreads() {
        long end = System.nanoTime() + 5_000_000_000L;
        List<String> left = backplaneThreads();
        while (!left.isEmpty() && System.nanoTime() < end) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            left = backplaneThreads();
        }
        if (!left.isEmpty()) {
            fail("threads left running after close: " + left);
        }
    }
}
