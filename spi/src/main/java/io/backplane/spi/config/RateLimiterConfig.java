package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Triton's {@code ModelRateLimiter}: what the host's rate limiter asks of each instance of an
 * {@code instance_group} before it may execute. The host applies it only when its rate limiter is
 * on ({@code --rate-limit execution_count}); otherwise it is parsed, checked and ignored.
 *
 * <p>An instance executes a batch only once every resource it lists is free in the count it
 * lists: a {@link Resource#global() global} resource in the host-wide pool, any other in the pool
 * of the instance's device (a CPU instance counts as device 0, as in Triton). The resources are
 * held for that execute and released when it returns. Waiting instances are chosen by
 * {@code executions × priority}, lowest first: an instance of priority 2 gets half the chances of
 * one of priority 1.
 *
 * <p>Immutable and thread-safe.
 *
 * @param resources the resources each instance of the group needs, names unique; empty: none (the
 *     rate limiter then never holds the instance back), immutable
 * @param priority the weight between waiting instances, ≥ 0; 0 counts as 1 (Triton's default)
 */
public record RateLimiterConfig(List<Resource> resources, int priority) {
    /**
     * @throws IllegalArgumentException when {@code priority} is negative or a resource name repeats
     *     (both named in the message)
     */
    public RateLimiterConfig {
        resources = List.copyOf(requireNonNull(resources, "resources is null"));
        if (priority < 0) {
            throw new IllegalArgumentException("rate_limiter priority " + priority + " is negative; give 1 (the default) or more");
        }
        Set<String> seen = new HashSet<>();
        for (Resource r : resources) {
            if (!seen.add(r.name())) {
                throw new IllegalArgumentException("rate_limiter resource '" + r.name() + "' is listed twice; list each resource once, with the count"
                        + " one instance needs");
            }
        }
    }

    /** The priority the scheduler uses: {@link #priority()}, with 0 counted as 1. */
    public int effectivePriority() {
        return Math.max(1, priority);
    }

    /**
     * One resource an instance needs (Triton's {@code ModelRateLimiter.Resource}).
     *
     * @param name the resource's name, not blank; names are case-sensitive
     * @param global whether the resource is one pool for the whole host rather than one per device
     * @param count how many copies one execute holds, ≥ 0 (0 holds none)
     */
    public record Resource(String name, boolean global, int count) {
        /** @throws IllegalArgumentException when the name is blank or the count negative (named in the message) */
        public Resource {
            requireNonNull(name, "name is null");
            if (name.isBlank()) {
                throw new IllegalArgumentException("rate_limiter resource name '" + name + "' is empty; give each resource a name, e.g. name: \"R1\"");
            }
            if (count < 0) {
                throw new IllegalArgumentException("rate_limiter resource '" + name + "': count " + count + " is negative; give the copies one"
                        + " execute needs (0 or more)");
            }
        }
    }
}
