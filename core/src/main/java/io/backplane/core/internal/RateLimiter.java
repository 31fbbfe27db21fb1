package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.RateLimiterConfig;
import io.backplane.spi.host.HostListener.Outcome;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Triton's rate limiter ({@code --rate-limit execution_count}): host-wide resource pools that
 * instances of every loaded model draw from before they execute, and priorities that weigh the
 * choice between waiting instances.
 *
 * <p><b>Design.</b> Each limited instance has one {@link Gate}, used only by its worker thread. A
 * worker that took a batch <em>stages</em> its gate ({@link Gate#acquire}) and waits until the
 * limiter grants it every resource it lists; it executes, then {@link Gate#executed} returns the
 * resources and counts the execution. When its model still has queued work at that moment the gate
 * is staged again in the same step, as Triton stages an instance that becomes available with work
 * pending, so the choice that follows weighs it against the other waiters instead of handing the
 * resources to whoever happened to wait. A worker that then finds no batch ready drops its claim
 * ({@link Gate#idle}): an idle instance never holds resources, and a claim lasts at most one
 * non-blocking look at the batcher. Grants go in order of {@code executions × priority}, then of
 * staging; a waiter that does not fit blocks the resources it lists for every waiter after it (so a
 * large claim is not starved by small ones), but not the other resources (an instance waiting on
 * device 0 does not hold back one on device 1; Triton's single staging queue would). An instance
 * registered late starts with the execution count of the least-served one, not at 0.
 *
 * <p>A worker waiting for resources holds a batch that left the queue: it ends requests cancelled
 * meanwhile with CANCELLED, gives up when every request of the batch ended (an unload's deadline
 * ends them, L7) or when its slot stops, so an unload never waits on the limiter longer than its
 * deadline and every request still ends exactly once (L1).
 *
 * <p>Thread-safe: one lock guards the pools, the waiters and every gate's state.
 */
public final class RateLimiter {
    private static final Logger log = LoggerFactory.getLogger(RateLimiter.class);
    /** The device of a global resource's pool. */
    static final int GLOBAL = -1;
    /** How often a waiting worker looks at cancellations and at its slot's state. */
    private static final long WAIT_MILLIS = 20;

    /**
     * The host's rate-limiter options.
     *
     * @param on {@code --rate-limit execution_count}; off (Triton's default) ignores every
     *     {@code rate_limiter} of the model configs
     * @param resources the {@code --rate-limit-resource} flags, in order
     */
    public record Settings(boolean on, List<ResourceLimit> resources) {
        /** Off, no resources: Triton's default. */
        public static final Settings OFF = new Settings(false, List.of());

        public Settings {
            resources = List.copyOf(requireNonNull(resources, "resources is null"));
        }
    }

    /**
     * One {@code --rate-limit-resource=<name>:<count>[:<device>]}: {@code count} copies of
     * {@code name} on {@code device}, or on every device when {@code device} is {@link #GLOBAL}
     * (-1); for a resource the models declare global, the largest count given for any device.
     */
    public record ResourceLimit(String name, int count, int device) {
        public ResourceLimit {
            requireNonNull(name, "name is null");
            if (name.isBlank()) {
                throw new IllegalArgumentException("rate-limit resource name '" + name + "' is empty");
            }
            if (count < 0) {
                throw new IllegalArgumentException("rate-limit resource '" + name + "': count " + count + " is negative");
            }
            if (device < GLOBAL) {
                throw new IllegalArgumentException("rate-limit resource '" + name + "': device " + device + " is negative");
            }
        }
    }

    /** A resource pool: a name on a device, or {@link #GLOBAL}. */
    private record Key(String name, int device) {
        @Override
        public String toString() {
            return "'" + name + "' " + (device == GLOBAL ? "(global)" : "on device " + device);
        }
    }

    private final boolean on;
    private final List<ResourceLimit> explicit;
    private final Set<String> explicitNames = new HashSet<>();
    private final ReentrantLock lock = new ReentrantLock();
    /** Guarded by lock. */
    private final Set<Gate> members = new HashSet<>();
    private final Map<Key, Integer> capacity = new HashMap<>();
    private final Map<Key, Integer> allocated = new HashMap<>();
    private final List<Gate> waiting = new ArrayList<>();
    private long stagings;

    public RateLimiter(Settings settings) {
        requireNonNull(settings, "settings is null");
        this.on = settings.on();
        this.explicit = settings.resources();
        for (ResourceLimit r : explicit) {
            explicitNames.add(r.name());
        }
        if (on) {
            log.info("rate limiter on (execution_count); resources given: {}", explicit.isEmpty() ? "none (each defaults to the most any instance asks)"
                    : explicit.stream().map(r -> r.name() + ":" + r.count() + (r.device() == GLOBAL ? "" : ":" + r.device())).toList());
        } else if (!explicit.isEmpty()) {
            log.warn("rate-limit resources {} are given but the rate limiter is off: they are ignored; turn it on with --rate-limit execution_count"
                    + " (embedded: rateLimit(RateLimitMode.EXECUTION_COUNT))", explicit.stream().map(ResourceLimit::name).toList());
        }
    }

    /** Whether the limiter is on ({@code --rate-limit execution_count}). */
    public boolean isOn() {
        return on;
    }

    /**
     * Registers one instance. Returns its gate, or null when the limiter never holds it back (the
     * limiter is off, or the instance lists no resource with a count above 0).
     *
     * @throws BackplaneException INVALID_ARGUMENT when a resource is global here and per-device in
     *     another loaded instance (or the reverse), or when {@code --rate-limit-resource} gives fewer
     *     copies than the instance needs (Triton refuses both loads too)
     */
    @Nullable Gate register(String model, long version, String instance, int device, @Nullable RateLimiterConfig config) {
        if (!on || config == null) {
            return null;
        }
        Map<Key, Integer> needs = new LinkedHashMap<>();
        for (RateLimiterConfig.Resource r : config.resources()) {
            if (r.count() > 0) {
                needs.put(new Key(r.name(), r.global() ? GLOBAL : device), r.count());
            }
        }
        if (needs.isEmpty()) {
            return null;
        }
        String who = "model '" + model + "' version " + version + " instance '" + instance + "'";
        lock.lock();
        try {
            for (Map.Entry<Key, Integer> need : needs.entrySet()) {
                Key k = need.getKey();
                for (Gate g : members) {
                    for (Key other : g.needs.keySet()) {
                        if (other.name().equals(k.name()) && (other.device() == GLOBAL) != (k.device() == GLOBAL)) {
                            throw BackplaneException.invalid("rate_limiter resource '" + k.name() + "' is " + (k.device() == GLOBAL ? "global" : "per-device")
                                    + " in " + who + " but " + (other.device() == GLOBAL ? "global" : "per-device") + " in " + g.who
                                    + "; a resource is either global or per-device for every loaded model: set global: true in both configs or in neither");
                        }
                    }
                }
                if (explicitNames.contains(k.name())) {
                    int given = explicitCapacity(k);
                    if (given < need.getValue()) {
                        throw BackplaneException.invalid(who + " needs " + need.getValue() + " of rate_limiter resource " + k + " but --rate-limit-resource"
                                + " gives " + given + ", so it could never execute; give at least that many (e.g. --rate-limit-resource=" + k.name() + ":"
                                + need.getValue() + (k.device() == GLOBAL ? "" : ":" + k.device()) + ") or lower the count in the model's rate_limiter");
                    }
                }
            }
            Gate g = new Gate(who, needs, config.effectivePriority());
            // a late instance starts level with the least-served one instead of at 0, which would let it take every turn
            // until its count caught up with instances that served for hours (Triton starts every count at 0)
            long least = members.stream().mapToLong(m -> m.executions * m.priority).min().orElse(0);
            g.executions = (least + g.priority - 1) / g.priority;
            members.add(g);
            recompute();
            log.debug("rate limiter: {} needs {} (priority {}); pools now {}", who, needs, g.priority, capacity);
            return g;
        } finally {
            lock.unlock();
        }
    }

    /** Copies of {@code k} the flags give: a global resource takes the largest count given for it. */
    private int explicitCapacity(Key k) {
        int c = 0;
        for (ResourceLimit r : explicit) {
            if (r.name().equals(k.name()) && (k.device() == GLOBAL || r.device() == GLOBAL || r.device() == k.device())) {
                c = Math.max(c, r.count());
            }
        }
        return c;
    }

    /** Pools: the flags' count for a resource they name, else the most any registered instance needs (Triton's default). Under lock. */
    private void recompute() {
        capacity.clear();
        for (Gate g : members) {
            for (Map.Entry<Key, Integer> need : g.needs.entrySet()) {
                capacity.merge(need.getKey(), need.getValue(), Math::max);
            }
        }
        for (Map.Entry<Key, Integer> e : capacity.entrySet()) {
            if (explicitNames.contains(e.getKey().name())) {
                e.setValue(explicitCapacity(e.getKey()));
            }
        }
    }

    /** The copies of each pool: for tests and diagnostics. */
    Map<String, Integer> pools() {
        lock.lock();
        try {
            Map<String, Integer> out = new LinkedHashMap<>();
            capacity.forEach((k, v) -> out.put(k.name() + (k.device() == GLOBAL ? "" : "@" + k.device()), v));
            return out;
        } finally {
            lock.unlock();
        }
    }

    /** Gates registered and not closed: for tests. */
    int registered() {
        lock.lock();
        try {
            return members.size();
        } finally {
            lock.unlock();
        }
    }

    /** Grants what fits, in order (see the class comment). Under lock. */
    private void allocate() {
        if (waiting.isEmpty()) {
            return;
        }
        waiting.sort(Comparator.comparingLong((Gate g) -> g.rank).thenComparingLong(g -> g.staged));
        Set<Key> blocked = new HashSet<>();
        for (var it = waiting.iterator(); it.hasNext();) {
            Gate g = it.next();
            if (fits(g) && Collections.disjoint(g.needs.keySet(), blocked)) {
                it.remove();
                g.staged = 0;
                g.granted = true;
                g.needs.forEach((k, n) -> allocated.merge(k, n, Integer::sum));
                g.turn.signalAll();
            } else {
                blocked.addAll(g.needs.keySet());
            }
        }
    }

    private boolean fits(Gate g) {
        for (Map.Entry<Key, Integer> need : g.needs.entrySet()) {
            if (allocated.getOrDefault(need.getKey(), 0) + need.getValue() > capacity.getOrDefault(need.getKey(), 0)) {
                return false;
            }
        }
        return true;
    }

    /**
     * One instance's place in the limiter. Every method but {@link #close} is called only by the
     * instance's worker thread; {@link #close} by whoever unloads the version, once its worker left
     * or while it still waits (it then gives up).
     */
    final class Gate {
        private final String who;
        private final Map<Key, Integer> needs;
        private final int priority;
        private final Condition turn = lock.newCondition();
        /** Guarded by lock: executions so far; the staging number while staged (else 0); the rank it was staged with. */
        private long executions;
        private long staged;
        private long rank;
        private boolean granted;
        private boolean closed;

        private Gate(String who, Map<Key, Integer> needs, int priority) {
            this.who = who;
            this.needs = Map.copyOf(needs);
            this.priority = priority;
        }

        /** Under lock. */
        private void stage() {
            if (staged == 0 && !granted && !closed) {
                staged = ++stagings;
                rank = executions * priority;
                waiting.add(this);
                allocate();
            }
        }

        /** Under lock: drops a waiting claim or returns unused resources, without counting an execution; then grants what fits. */
        private void drop() {
            release();
            allocate();
        }

        /** Under lock: as {@link #drop} without granting anything yet. */
        private void release() {
            if (staged != 0) {
                waiting.remove(this);
                staged = 0;
            }
            if (granted) {
                granted = false;
                needs.forEach((k, n) -> allocated.merge(k, -n, Integer::sum));
            }
        }

        /** Whether it holds its resources: for tests. */
        boolean granted() {
            lock.lock();
            try {
                return granted;
            } finally {
                lock.unlock();
            }
        }

        /** Whether it waits for resources or holds them (its worker should only look at the batcher, not wait on it). */
        boolean claimed() {
            lock.lock();
            try {
                return staged != 0 || granted;
            } finally {
                lock.unlock();
            }
        }

        /**
         * Waits until this instance holds its resources, for {@code batch} (taken from the batcher).
         * Returns the requests of the batch still open, to execute, the resources held until
         * {@link #executed}; or an empty list, nothing held, when every request ended meanwhile or
         * {@code running} turned false (the requests still open then end with UNAVAILABLE). Requests
         * cancelled while it waits end with CANCELLED.
         */
        List<RequestState> acquire(List<RequestState> batch, BooleanSupplier running) {
            boolean stopping = false;
            while (true) {
                lock.lock();
                try {
                    stage();
                    if (granted) {
                        List<RequestState> open = open(batch);
                        if (open.isEmpty()) {
                            drop();
                        }
                        return open;
                    }
                    if (closed || !running.getAsBoolean()) {
                        drop();
                        stopping = true;
                    } else if (open(batch).isEmpty()) {
                        drop();
                        return List.of();
                    } else {
                        try {
                            turn.await(WAIT_MILLIS, TimeUnit.MILLISECONDS);
                        } catch (InterruptedException e) {
                            if (running.getAsBoolean()) {
                                Thread.currentThread().interrupt(); // not ours to swallow; the worker goes on
                            }
                            drop();
                            stopping = true;
                        }
                    }
                } finally {
                    lock.unlock();
                }
                if (stopping) {
                    end(batch, BackplaneException.unavailable(who + " stopped while the request waited for rate-limiter resources"),
                            Outcome.OTHER, "rate-limiter-stopped");
                    return List.of();
                }
                for (RequestState r : batch) {
                    if (r.isCancelled() && !r.isClosed()) {
                        r.terminate(new BackplaneException(ErrorCode.CANCELLED, r.describe() + " was cancelled while it waited for rate-limiter resources"),
                                Outcome.CANCELED, "rate-limiter-cancel");
                    }
                }
            }
        }

        private static List<RequestState> open(List<RequestState> batch) {
            int open = 0;
            for (RequestState r : batch) {
                if (!r.isClosed()) {
                    open++;
                }
            }
            if (open == batch.size()) {
                return batch;
            }
            List<RequestState> out = new ArrayList<>(open);
            for (RequestState r : batch) {
                if (!r.isClosed()) {
                    out.add(r);
                }
            }
            return out;
        }

        private static void end(List<RequestState> batch, BackplaneException e, Outcome outcome, String path) {
            for (RequestState r : batch) {
                if (!r.isClosed()) {
                    r.terminate(e, outcome, path);
                }
            }
        }

        /**
         * The execute that {@link #acquire} allowed returned: releases the resources and counts the
         * execution; with {@code moreQueued} (its model still has queued work) stages the instance
         * again in the same step, so the choice that follows weighs it too.
         */
        void executed(boolean moreQueued) {
            lock.lock();
            try {
                if (granted) {
                    executions++;
                    release(); // and, with work queued, staged before anything is granted: one choice among every waiter
                }
                if (moreQueued) {
                    stage();
                } else {
                    allocate();
                }
            } finally {
                lock.unlock();
            }
        }

        /** The worker found no batch, or will not execute the one it has: drops its claim, counting nothing. */
        void idle() {
            lock.lock();
            try {
                drop();
            } finally {
                lock.unlock();
            }
        }

        /** Unregisters the instance (its version unloads): its claim is dropped, a waiting worker gives up. Idempotent. */
        void close() {
            lock.lock();
            try {
                if (closed) {
                    return;
                }
                closed = true;
                members.remove(this);
                drop();
                recompute();
                allocate();
                turn.signalAll();
            } finally {
                lock.unlock();
            }
        }

        @Override
        public String toString() {
            return who;
        }
    }
}
