package io.backplane.spi;

/**
 * A monotonic nanosecond clock. The host passes one to batchers so that tests can drive time
 * deterministically; production uses {@link #system()}.
 */
@FunctionalInterface
public interface Ticker {
    /** Nanoseconds from an arbitrary origin; never goes backwards. */
    long nanoTime();

    /** The system's monotonic clock ({@link System#nanoTime()}). */
    static Ticker system() {
        return System::nanoTime;
    }
}
