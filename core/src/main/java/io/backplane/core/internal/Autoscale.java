package io.backplane.core.internal;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.config.ModelConfig;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * A model's autoscaling policy, read from its config's {@code parameters} (config.pbtxt follows
 * Triton's proto, which has no such block), and the decision it takes from one sample of the
 * model's load. DJL Serving's {@code minWorkers}/{@code maxWorkers}/{@code max_idle_time} are the
 * model:
 *
 * <ul>
 *   <li>{@code autoscale_min_instances}, {@code autoscale_max_instances}: the bounds of the
 *       instance group's {@code count} (both needed to turn autoscaling on; 1 ≤ min ≤ max);
 *   <li>{@code autoscale_queue_depth}: add an instance when at least this many requests wait in
 *       the queue at a check (default 1, unless only {@code autoscale_queue_delay_us} is given);
 *   <li>{@code autoscale_queue_delay_us}: add an instance when the oldest queued request has
 *       waited at least this long (off by default);
 *   <li>{@code autoscale_idle_ms}: retire an instance after nothing was queued and at least one
 *       instance was idle at every check for this long (default 60000, DJL's {@code max_idle_time});
 *   <li>{@code autoscale_interval_ms}: how often the model is checked (default 100).
 * </ul>
 *
 * One step per check: at most one instance is added or retired. Pure: no state, no clock.
 */
final class Autoscale {
    static final String MIN = "autoscale_min_instances";
    static final String MAX = "autoscale_max_instances";
    static final String DEPTH = "autoscale_queue_depth";
    static final String DELAY = "autoscale_queue_delay_us";
    static final String IDLE = "autoscale_idle_ms";
    static final String INTERVAL = "autoscale_interval_ms";
    private static final String[] ALL = {MIN, MAX, DEPTH, DELAY, IDLE, INTERVAL};

    private Autoscale() {
    }

    /**
     * A policy: counts in units of the group's {@code count}; {@code queueDepth} 0 and
     * {@code queueDelayNanos} 0 mean that trigger is off.
     */
    record Policy(int min, int max, int queueDepth, long queueDelayNanos, long idleNanos, long intervalMillis) {
    }

    /** One look at the model: requests queued, how long the oldest waited, instances executing, instances serving. */
    record Sample(int queued, long oldestWaitNanos, int busy, int instances) {
    }

    /**
     * The policy {@code config} asks for, or null when it sets none of the {@code autoscale_*}
     * parameters.
     *
     * @throws BackplaneException INVALID_ARGUMENT naming the parameter, its value and what to give
     */
    static @Nullable Policy of(ModelConfig config, int maxPerModel) {
        Map<String, String> p = config.parameters();
        boolean any = false;
        for (String k : ALL) {
            any |= p.containsKey(k);
        }
        if (!any) {
            return null;
        }
        String model = config.name();
        if (!p.containsKey(MIN) || !p.containsKey(MAX)) {
            throw BackplaneException.invalid("model '" + model + "': autoscaling needs both " + MIN + " and " + MAX + " in its parameters (it has "
                    + (p.containsKey(MIN) ? MIN : p.containsKey(MAX) ? MAX : "neither") + "); give both, e.g. " + MIN + ": 1 and " + MAX + ": 4");
        }
        int min = (int) number(model, p, MIN, 1, 1, maxPerModel, "a whole number of instances from 1 to the per-model limit of " + maxPerModel);
        int max = (int) number(model, p, MAX, min, min, maxPerModel, "a whole number of instances from " + MIN + " (" + min
                + ") to the per-model limit of " + maxPerModel);
        long delayMicros = number(model, p, DELAY, 0, 0, Long.MAX_VALUE / 1000, "a whole number of microseconds ≥ 0 (0 turns it off)");
        int depth = (int) number(model, p, DEPTH, delayMicros > 0 ? 0 : 1, 0, Integer.MAX_VALUE, "a whole number of queued requests ≥ 0 (0 turns it off)");
        if (depth == 0 && delayMicros == 0) {
            throw BackplaneException.invalid("model '" + model + "': " + DEPTH + " and " + DELAY + " are both 0, so nothing would ever add an instance; "
                    + "give one of them a value above 0");
        }
        long idleMillis = number(model, p, IDLE, 60_000, 1, Long.MAX_VALUE / 1_000_000, "a whole number of milliseconds ≥ 1");
        long interval = number(model, p, INTERVAL, 100, 1, 3_600_000, "a whole number of milliseconds from 1 to 3600000");
        int groups = config.instanceGroups().size();
        if (groups > 1) {
            throw BackplaneException.invalid("model '" + model + "': autoscaling (" + MIN + ", " + MAX + ") scales one instance_group, but the config has "
                    + groups + "; keep one group, or remove the autoscale_* parameters");
        }
        int count = groups == 0 ? 1 : config.instanceGroups().getFirst().count();
        if (count < min || count > max) {
            throw BackplaneException.invalid("model '" + model + "': the instance_group count " + count + " is outside " + MIN + " " + min + " .. "
                    + MAX + " " + max + "; give a count within the bounds (the count is the number of instances at load)");
        }
        return new Policy(min, max, depth, TimeUnit.MICROSECONDS.toNanos(delayMicros), TimeUnit.MILLISECONDS.toNanos(idleMillis), interval);
    }

    private static long number(String model, Map<String, String> p, String key, long dflt, long low, long high, String what) {
        String v = p.get(key);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n >= low && n <= high) {
                return n;
            }
        } catch (NumberFormatException e) {
            // answered below
        }
        throw BackplaneException.invalid("model '" + model + "': parameter " + key + " is '" + v + "'; give " + what);
    }

    /**
     * What one check does: +1 (add an instance), -1 (retire one) or 0. {@code idleSince}: when the
     * model was first seen idle in the run of idle checks that ends with this one ({@code now} if it
     * is the first), or -1 when this check is not idle; the caller keeps it between checks.
     */
    static int decide(Policy policy, Sample s, long now, long idleSince) {
        boolean deep = policy.queueDepth() > 0 && s.queued() >= policy.queueDepth();
        boolean late = policy.queueDelayNanos() > 0 && s.queued() > 0 && s.oldestWaitNanos() >= policy.queueDelayNanos();
        if ((deep || late) && s.instances() < policy.max()) {
            return 1;
        }
        if (idleSince >= 0 && now - idleSince >= policy.idleNanos() && s.instances() > policy.min()) {
            return -1;
        }
        return 0;
    }

    /** Whether {@code s} counts as idle: nothing queued and at least one instance not executing. */
    static boolean idle(Sample s) {
        return s.queued() == 0 && s.busy() < s.instances();
    }
}
