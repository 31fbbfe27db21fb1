package io.backplane.core;

import java.util.Locale;

/**
 * Triton's {@code --rate-limit}: whether the host's rate limiter applies the {@code rate_limiter}
 * of the models' instance groups (resources and priorities). See docs/model-repository.md.
 */
public enum RateLimitMode {
    /** Triton's default: every {@code rate_limiter} is ignored; an instance executes as soon as it is free. */
    OFF,
    /**
     * An instance executes only when every resource its group lists is free; waiting instances are
     * chosen by their execution count times their priority, lowest first.
     */
    EXECUTION_COUNT;

    /**
     * The mode Triton's flag value names, case-insensitive: {@code off} or {@code execution_count}.
     *
     * @throws IllegalArgumentException for any other value, naming it and the two accepted
     */
    public static RateLimitMode parse(String value) {
        return switch (value.strip().toLowerCase(Locale.ROOT)) {
            case "off" -> OFF;
            case "execution_count" -> EXECUTION_COUNT;
            default -> throw new IllegalArgumentException("rate limit mode '" + value + "' is not one of off, execution_count");
        };
    }
}
