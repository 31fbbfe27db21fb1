package io.backplane.core.internal;

import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.ModelStatistics;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The core's one statistics hook: cumulative per-version counters for Triton's statistics
 * extension, fed by the same events as the listeners (it is the first listener, so it sees every
 * event). Entries exist only for versions that loaded with instances, or accepted or executed a request; a version's
 * counters survive its reloads, as Triton's do. Thread-safe; the hot path is a map lookup and a
 * few adder increments.
 *
 * <p>Seam for schedulers with their own counters (ensemble steps, response cache): they report
 * through {@link HostListener} events, and new counters are added to {@link Counters} and to
 * {@link #snapshot}.
 */
public final class Statistics implements HostListener {
    private final Map<Key, Counters> counters = new ConcurrentHashMap<>();

    private record Key(String model, long version) {
    }

    private static final class Pair {
        final LongAdder count = new LongAdder();
        final LongAdder nanos = new LongAdder();

        void add(long n) {
            count.increment();
            nanos.add(n);
        }

        ModelStatistics.Duration get() {
            return new ModelStatistics.Duration(count.sum(), nanos.sum());
        }
    }

    private static final class Counters {
        final Pair success = new Pair();
        final Pair fail = new Pair();
        final Pair queue = new Pair();
        final Pair compute = new Pair();
        final LongAdder inferences = new LongAdder();
        final LongAdder executions = new LongAdder();
        final AtomicLong lastInference = new AtomicLong();
        final Map<Integer, LongAdder> batches = new ConcurrentSkipListMap<>();
        final Pair cacheHit = new Pair();
        final Pair cacheMiss = new Pair();
        final Pair firstToken = new Pair();
        /** Counted per token: a response of k tokens adds k and its delay once. */
        final LongAdder interTokens = new LongAdder();
        final LongAdder interTokenNanos = new LongAdder();
        final LongAdder outputTokens = new LongAdder();
        /** Instances now (instancesChanged); 0 once unloaded. */
        final java.util.concurrent.atomic.AtomicInteger instances = new java.util.concurrent.atomic.AtomicInteger();
    }

    @Override
    public void instancesChanged(String model, long version, int instances) {
        of(model, version).instances.set(instances);
    }

    private Counters of(String model, long version) {
        return counters.computeIfAbsent(new Key(model, version), k -> new Counters());
    }

    @Override
    public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
        Counters c = of(model, version);
        c.lastInference.set(System.currentTimeMillis());
        if (outcome == Outcome.SUCCESS) {
            c.success.add(queueNanos + computeNanos);
            c.queue.add(queueNanos);
            c.compute.add(computeNanos);
        } else {
            c.fail.add(queueNanos + computeNanos);
        }
    }

    @Override
    public void responseSent(String model, long version, boolean first, long nanos, long tokens) {
        Counters c = of(model, version);
        c.outputTokens.add(tokens);
        if (first) {
            c.firstToken.add(nanos);
        } else {
            c.interTokens.add(tokens);
            c.interTokenNanos.add(nanos);
        }
    }

    @Override
    public void batchExecuted(String model, long version, int requests, int batchSize) {
        Counters c = of(model, version);
        c.executions.increment();
        c.inferences.add(batchSize);
        c.batches.computeIfAbsent(batchSize, k -> new LongAdder()).increment();
    }

    @Override
    public void cacheLookup(String model, long version, boolean hit, long lookupNanos) {
        Counters c = of(model, version);
        (hit ? c.cacheHit : c.cacheMiss).add(lookupNanos);
    }

    @Override
    public void cacheInserted(String model, long version, long insertNanos) {
        of(model, version).cacheMiss.nanos.add(insertNanos);
    }

    /** The statistics of one version now; zeros if it saw no request. */
    public ModelStatistics snapshot(String model, long version) {
        Counters c = counters.get(new Key(model, version));
        if (c == null) {
            var z = ModelStatistics.Duration.ZERO;
            return new ModelStatistics(model, version, 0, 0, 0, z, z, z, z, z, z, List.of(), List.of(), z, z, ModelStatistics.Generation.ZERO, 0);
        }
        var compute = c.compute.get();
        var none = new ModelStatistics.Duration(compute.count(), 0);
        List<ModelStatistics.BatchStatistics> batches = new ArrayList<>();
        c.batches.forEach((size, n) -> {
            var count = new ModelStatistics.Duration(n.sum(), 0);
            batches.add(new ModelStatistics.BatchStatistics(size, count, count, count));
        });
        return new ModelStatistics(model, version, c.lastInference.get(), c.inferences.sum(), c.executions.sum(), c.success.get(),
                c.fail.get(), c.queue.get(), none, compute, none, batches, List.of(), c.cacheHit.get(), c.cacheMiss.get(),
                new ModelStatistics.Generation(c.firstToken.get(), new ModelStatistics.Duration(c.interTokens.sum(), c.interTokenNanos.sum()),
                        c.outputTokens.sum()), c.instances.get());
    }
}
