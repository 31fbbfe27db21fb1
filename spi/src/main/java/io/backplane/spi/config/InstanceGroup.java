package io.backplane.spi.config;

import static java.util.Objects.requireNonNull;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * One {@code instance_group}: {@code count} instances of {@code kind}; for GPU, {@code count}
 * instances on each device listed in {@code gpus}. When {@code gpus} is empty the core places the
 * group on device 0 (it does not enumerate devices; Triton would use every visible GPU).
 *
 * <p>A group may carry Triton's {@code rate_limiter} ({@link #rateLimiter()}): the resources and
 * priority the host's rate limiter applies to each of its instances when it is on.
 *
 * <p>Immutable and thread-safe. No public constructor, so fields can be added (Triton's
 * {@code secondary_devices} …) without breaking compiled plugins.
 */
public final class InstanceGroup {
    private final String name;
    private final int count;
    private final InstanceKind kind;
    private final List<Integer> gpus;
    private final @Nullable RateLimiterConfig rateLimiter;

    private InstanceGroup(Builder b) {
        this.rateLimiter = b.rateLimiter;
        this.name = requireNonNull(b.name, "name is null");
        this.kind = requireNonNull(b.kind, "kind is null");
        this.gpus = List.copyOf(b.gpus);
        this.count = b.count;
        if (count < 1) {
            throw new IllegalArgumentException("instance_group '" + name + "': count " + count + " must be ≥ 1");
        }
    }

    /**
     * A group of {@code count} instances of {@code kind} on {@code gpus}.
     *
     * @throws IllegalArgumentException when {@code count} is below 1 (named in the message)
     */
    public static InstanceGroup of(String name, int count, InstanceKind kind, List<Integer> gpus) {
        return builder(name).count(count).kind(kind).gpus(gpus).build();
    }

    /** A builder for a group named {@code name} (empty: the core names it); one AUTO instance by default. */
    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** A builder holding this group's values. */
    public Builder toBuilder() {
        return new Builder(name).count(count).kind(kind).gpus(gpus).rateLimiter(rateLimiter);
    }

    /** Group name; the parser names an unnamed group {@code <model>_<index>}. */
    public String name() {
        return name;
    }

    /** Instances per device, ≥ 1. */
    public int count() {
        return count;
    }

    /** Where the instances run. */
    public InstanceKind kind() {
        return kind;
    }

    /** GPU ordinals for {@link InstanceKind#GPU}; empty means device 0. Immutable. */
    public List<Integer> gpus() {
        return gpus;
    }

    /**
     * Triton's {@code rate_limiter} of this group: the resources and priority each of its instances
     * has under the host's rate limiter; null when the config gives none (the rate limiter then
     * never holds these instances back).
     */
    public @Nullable RateLimiterConfig rateLimiter() {
        return rateLimiter;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof InstanceGroup g && name.equals(g.name) && count == g.count && kind == g.kind && gpus.equals(g.gpus)
                && Objects.equals(rateLimiter, g.rateLimiter);
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, count, kind, gpus, rateLimiter);
    }

    @Override
    public String toString() {
        return "InstanceGroup[name=" + name + ", count=" + count + ", kind=" + kind + (gpus.isEmpty() ? "" : ", gpus=" + gpus)
                + (rateLimiter == null ? "" : ", rateLimiter=" + rateLimiter) + "]";
    }

    /** Builds {@link InstanceGroup}s; not thread-safe. */
    public static final class Builder {
        private final String name;
        private int count = 1;
        private InstanceKind kind = InstanceKind.AUTO;
        private List<Integer> gpus = new ArrayList<>();
        private @Nullable RateLimiterConfig rateLimiter;

        private Builder(String name) {
            this.name = requireNonNull(name, "name is null");
        }

        /** Instances per device; 1 by default. */
        public Builder count(int v) {
            count = v;
            return this;
        }

        /** Where the instances run; {@link InstanceKind#AUTO} by default. */
        public Builder kind(InstanceKind v) {
            kind = requireNonNull(v, "kind is null");
            return this;
        }

        /** GPU ordinals; empty by default. */
        public Builder gpus(List<Integer> v) {
            gpus = new ArrayList<>(requireNonNull(v, "gpus is null"));
            return this;
        }

        /** Triton's {@code rate_limiter}; null (the default): none. */
        public Builder rateLimiter(@Nullable RateLimiterConfig v) {
            rateLimiter = v;
            return this;
        }

        /**
         * The group.
         *
         * @throws IllegalArgumentException when count is below 1
         */
        public InstanceGroup build() {
            return new InstanceGroup(this);
        }
    }
}
