package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Triton's {@code ModelRateLimiter}: what the host's rate limiter asks of each instance of an
 * {@code instance_group} before it may execute. The host applies it only when its rate limiter is
 * on ({@code --rate-limit execution_count}); otherwise it is parsed, checked and ignored.
 *
 * <p>An instance executes a batch only once every resource it lists is free in the count it
 * lists: a {@linkplain Resource#global() global} resource in the host-wide pool, any other in the
 * pool of the instance's device (a CPU instance counts as device 0, as in Triton). The resources
 * are held for that execute and released when it returns. Waiting instances are chosen by
 * {@code executions × priority}, lowest first: an instance of priority 2 gets half the chances of
 * one of priority 1.
 *
 * <p>Immutable and thread-safe. No public constructor, so fields can be added without breaking
 * compiled plugins.
 */
public final class RateLimiterConfig {
    private final List<Resource> resources;
    private final int priority;

    private RateLimiterConfig(Builder b) {
        this.resources = List.copyOf(b.resources);
        this.priority = b.priority;
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

    /**
     * A rate limiter configuration with these resources and priority.
     *
     * @throws IllegalArgumentException when {@code priority} is negative or a resource name repeats
     *     (both named in the message)
     */
    public static RateLimiterConfig of(List<Resource> resources, int priority) {
        return builder().resources(resources).priority(priority).build();
    }

    /** A builder with no resources and priority 0 (counted as 1). */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this configuration's values. */
    public Builder toBuilder() {
        return builder().resources(resources).priority(priority);
    }

    /** The resources each instance of the group needs, names unique; empty: none (never held back). Immutable. */
    public List<Resource> resources() {
        return resources;
    }

    /** The weight between waiting instances as configured, ≥ 0; 0 counts as 1 ({@link #effectivePriority()}). */
    public int priority() {
        return priority;
    }

    /** The priority the scheduler uses: {@link #priority()}, with 0 counted as 1 (Triton's default). */
    public int effectivePriority() {
        return Math.max(1, priority);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RateLimiterConfig r && resources.equals(r.resources) && priority == r.priority;
    }

    @Override
    public int hashCode() {
        return Objects.hash(resources, priority);
    }

    @Override
    public String toString() {
        return "RateLimiterConfig[resources=" + resources + ", priority=" + priority + "]";
    }

    /**
     * One resource an instance needs (Triton's {@code ModelRateLimiter.Resource}). Immutable and
     * thread-safe; no public constructor.
     */
    public static final class Resource {
        private final String name;
        private final boolean global;
        private final int count;

        private Resource(String name, boolean global, int count) {
            this.name = requireNonNull(name, "name is null");
            this.global = global;
            this.count = count;
            if (name.isBlank()) {
                throw new IllegalArgumentException("rate_limiter resource name '" + name + "' is empty; give each resource a name, e.g. name: \"R1\"");
            }
            if (count < 0) {
                throw new IllegalArgumentException("rate_limiter resource '" + name + "': count " + count + " is negative; give the copies one"
                        + " execute needs (0 or more)");
            }
        }

        /**
         * {@code count} copies of {@code name}, from the host-wide pool when {@code global}, else
         * from the pool of the instance's device.
         *
         * @throws IllegalArgumentException when the name is blank or the count negative (named in the message)
         */
        public static Resource of(String name, boolean global, int count) {
            return new Resource(name, global, count);
        }

        /** The resource's name, not blank; names are case-sensitive. */
        public String name() {
            return name;
        }

        /** Whether the resource is one pool for the whole host rather than one per device. */
        public boolean global() {
            return global;
        }

        /** How many copies one execute holds, ≥ 0 (0 holds none). */
        public int count() {
            return count;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Resource r && name.equals(r.name) && global == r.global && count == r.count;
        }

        @Override
        public int hashCode() {
            return Objects.hash(name, global, count);
        }

        @Override
        public String toString() {
            return name + (global ? " (global)" : "") + ": " + count;
        }
    }

    /** Builds {@link RateLimiterConfig}s; not thread-safe. */
    public static final class Builder {
        private List<Resource> resources = new ArrayList<>();
        private int priority;

        private Builder() {
        }

        /** The resources, replacing any given before; none by default. */
        public Builder resources(List<Resource> v) {
            resources = new ArrayList<>(requireNonNull(v, "resources is null"));
            return this;
        }

        /** Adds one resource. */
        public Builder resource(Resource v) {
            resources.add(requireNonNull(v, "resource is null"));
            return this;
        }

        /** The priority; 0 (counted as 1) by default. */
        public Builder priority(int v) {
            priority = v;
            return this;
        }

        /**
         * The configuration.
         *
         * @throws IllegalArgumentException when the priority is negative or a resource name repeats
         */
        public RateLimiterConfig build() {
            return new RateLimiterConfig(this);
        }
    }
}
