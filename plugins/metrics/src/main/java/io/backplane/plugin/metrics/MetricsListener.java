package io.backplane.plugin.metrics;

import io.backplane.spi.host.HostListener;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Turns host events into meters, per model and version, in two families that can each be turned
 * off: Backplane's ({@code backplane_*}, Micrometer) and Triton's ({@code nv_inference_*},
 * {@link TritonMetrics}). A version's series are created when it loads ({@link #versionLoaded}),
 * never by a request: requests naming a model that is not in the repository all count in one
 * series, {@code model="_unknown"}, so clients cannot grow {@code /metrics}. The hot path is a map
 * lookup and a few increments. After {@link #stop()} events are ignored (the SPI has no way to
 * remove a listener).
 *
 * <p>Backplane meters (Prometheus names):
 * <ul>
 *   <li>{@code backplane_inference_success_total{model,version}}
 *   <li>{@code backplane_inference_failure_total{model,version,reason}}, reason one of
 *       {@code rejected}, {@code canceled}, {@code backend}, {@code other}; requests rejected
 *       before acceptance (bad input) carry {@code version="none"}
 *   <li>{@code backplane_inference_queue_duration_seconds{model,version}} (histogram)
 *   <li>{@code backplane_inference_compute_duration_seconds{model,version}} (histogram)
 *   <li>{@code backplane_inference_inflight_requests{model,version}} (gauge)
 *   <li>{@code backplane_inference_batches_total{model,version}} and
 *       {@code backplane_inference_batch_size{model,version}} (summary)
 *   <li>{@code backplane_instance_restarts_total{model,version}}
 *   <li>{@code backplane_model_instances{model,version}} (gauge): instances now; it changes while
 *       the model serves (a load whose override changes only instance counts, or autoscaling)
 *   <li>{@code backplane_duplicate_releases_total{model,version}} (L4 suppressed second releases)
 *   <li>{@code backplane_time_to_first_token_seconds{model,version}} (histogram): per request that
 *       sent output, from its acceptance to its first response with output
 *   <li>{@code backplane_inter_token_latency_seconds{model,version}} (histogram): per output token
 *       of a request's later responses, the time since its previous response divided by the
 *       tokens the response carries (a response of k tokens records k samples, at most
 *       {@value #MAX_TOKEN_SAMPLES})
 *   <li>{@code backplane_output_tokens_total{model,version}}: output tokens sent, first responses
 *       included ({@code rate()} of it is tokens per second)
 * </ul>
 * The generation meters follow {@link HostListener#responseSent}: a token is what a response's
 * {@code num_output_tokens} output says, else the response itself.
 */
final class MetricsListener implements HostListener {
    /** The one series every request for a model outside the repository counts in. */
    static final String UNKNOWN = "_unknown";
    /**
     * The most inter-token samples one response records: a backend that reports an absurd
     * {@code num_output_tokens} costs bounded time on its sender's thread.
     */
    static final int MAX_TOKEN_SAMPLES = 4096;

    private final MeterRegistry registry;
    private final boolean backplane;
    private final @Nullable TritonMetrics triton;
    private final Map<Key, ModelMeters> meters = new ConcurrentHashMap<>();
    private final Set<String> known = ConcurrentHashMap.newKeySet();
    private volatile boolean stopped;

    MetricsListener(MeterRegistry registry, boolean backplane, @Nullable TritonMetrics triton) {
        this.registry = registry;
        this.backplane = backplane;
        this.triton = triton;
    }

    void stop() {
        stopped = true;
    }

    private record Key(String model, long version) {
    }

    private final class ModelMeters {
        final AtomicLong inFlight = new AtomicLong();
        final AtomicLong instances = new AtomicLong();
        final TritonMetrics.@Nullable Series nv;
        final @Nullable BackplaneMeters bp;

        ModelMeters(String model, String version) {
            nv = triton == null ? null : triton.series(model, version.equals("none") ? "" : version);
            bp = backplane ? new BackplaneMeters(model, version, inFlight, instances) : null;
        }
    }

    private final class BackplaneMeters {
        final Counter success;
        final Map<Outcome, Counter> failures = new EnumMap<>(Outcome.class);
        final Timer queue;
        final Timer compute;
        final Counter batches;
        final DistributionSummary batchSize;
        final Counter restarts;
        final Counter duplicates;
        final Timer firstToken;
        final Timer interToken;
        final Counter outputTokens;

        BackplaneMeters(String model, String version, AtomicLong inFlight, AtomicLong instances) {
            success = Counter.builder("backplane.inference.success").description("Requests that ended successfully")
                    .tags("model", model, "version", version).register(registry);
            for (Outcome o : Outcome.values()) {
                if (o != Outcome.SUCCESS) {
                    failures.put(o, Counter.builder("backplane.inference.failure").description("Requests that failed, by reason")
                            .tags("model", model, "version", version, "reason", o.name().toLowerCase(Locale.ROOT)).register(registry));
                }
            }
            queue = Timer.builder("backplane.inference.queue.duration").description("Time from acceptance to dispatch")
                    .tags("model", model, "version", version).publishPercentileHistogram()
                    .minimumExpectedValue(Duration.ofNanos(1000)).maximumExpectedValue(Duration.ofSeconds(60)).register(registry);
            compute = Timer.builder("backplane.inference.compute.duration").description("Time from dispatch to the end of the request")
                    .tags("model", model, "version", version).publishPercentileHistogram()
                    .minimumExpectedValue(Duration.ofNanos(1000)).maximumExpectedValue(Duration.ofSeconds(60)).register(registry);
            Gauge.builder("backplane.inference.inflight.requests", inFlight, AtomicLong::get).description("Requests accepted and not yet ended")
                    .tags("model", model, "version", version).register(registry);
            Gauge.builder("backplane.model.instances", instances, AtomicLong::get).description("Instances of the model version now")
                    .tags("model", model, "version", version).register(registry);
            batches = Counter.builder("backplane.inference.batches").description("Batches dispatched to instances")
                    .tags("model", model, "version", version).register(registry);
            batchSize = DistributionSummary.builder("backplane.inference.batch.size").description("Batch size along the batch dimension")
                    .tags("model", model, "version", version).register(registry);
            restarts = Counter.builder("backplane.instance.restarts").description("Instances replaced after a failure")
                    .tags("model", model, "version", version).register(registry);
            duplicates = Counter.builder("backplane.duplicate.releases").description("Second releases of an ended request, suppressed (L4)")
                    .tags("model", model, "version", version).register(registry);
            firstToken = Timer.builder("backplane.time.to.first.token")
                    .description("Time from acceptance to a request's first response with output (time to first token)")
                    .tags("model", model, "version", version).publishPercentileHistogram()
                    .minimumExpectedValue(Duration.ofNanos(1000)).maximumExpectedValue(Duration.ofSeconds(60)).register(registry);
            interToken = Timer.builder("backplane.inter.token.latency")
                    .description("Time between a request's responses with output, per output token (inter-token latency)")
                    .tags("model", model, "version", version).publishPercentileHistogram()
                    .minimumExpectedValue(Duration.ofNanos(1000)).maximumExpectedValue(Duration.ofSeconds(60)).register(registry);
            outputTokens = Counter.builder("backplane.output.tokens").description("Output tokens sent (num_output_tokens, else 1 per response)")
                    .tags("model", model, "version", version).register(registry);
        }
    }

    private ModelMeters create(Key key) {
        return meters.computeIfAbsent(key, k -> new ModelMeters(k.model(), k.version() > 0 ? Long.toString(k.version()) : "none"));
    }

    /** The meters of a version; a model outside the repository gets the one shared unknown series. */
    private ModelMeters of(String model, long version) {
        ModelMeters m = meters.get(new Key(model, version));
        if (m != null) {
            return m;
        }
        return create(known.contains(model) ? new Key(model, version) : new Key(UNKNOWN, 0));
    }

    /** Creates the series of a version when it is loaded (and of its model, for rejected requests). */
    @Override
    public void versionLoaded(String model, long version) {
        if (!stopped) {
            known.add(model);
            create(new Key(model, version));
            create(new Key(model, 0));
        }
    }

    @Override
    public void versionLoaded(String model, long version, long loadNanos) {
        versionLoaded(model, version);
        TritonMetrics t = triton;
        if (!stopped && t != null) {
            t.loaded(model, Long.toString(version), loadNanos);
        }
    }

    @Override
    public void versionUnloaded(String model, long version) {
        TritonMetrics t = triton;
        if (t != null) {
            t.unloaded(model, Long.toString(version));
        }
    }

    @Override
    public void requestAccepted(String model, long version) {
        if (!stopped) {
            ModelMeters m = of(model, version);
            m.inFlight.incrementAndGet();
            if (m.nv != null) {
                m.nv.pending.incrementAndGet();
            }
        }
    }

    /** Triton's pending count: accepted and not yet taken by an instance (nor answered from the cache, nor ended in the queue). */
    @Override
    public void requestLeftQueue(String model, long version) {
        if (!stopped) {
            ModelMeters m = of(model, version);
            if (m.nv != null) {
                m.nv.pending.decrementAndGet();
            }
        }
    }

    @Override
    public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
        if (stopped) {
            return;
        }
        ModelMeters mm = of(model, version);
        mm.inFlight.decrementAndGet();
        if (mm.nv != null) {
            TritonMetrics t = triton;
            if (t != null) {
                t.ended(mm.nv, outcome, queueNanos, computeNanos);
            }
        }
        BackplaneMeters m = mm.bp;
        if (m == null) {
            return;
        }
        if (outcome == Outcome.SUCCESS) {
            m.success.increment();
        } else {
            m.failures.get(outcome).increment();
        }
        if (queueNanos > 0 || computeNanos > 0) {
            m.queue.record(queueNanos, TimeUnit.NANOSECONDS);
        }
        if (computeNanos > 0) {
            m.compute.record(computeNanos, TimeUnit.NANOSECONDS);
        }
    }

    @Override
    public void responseSent(String model, long version, boolean first, long nanos, long tokens) {
        if (stopped) {
            return;
        }
        BackplaneMeters m = of(model, version).bp;
        if (m == null) {
            return;
        }
        m.outputTokens.increment(tokens);
        if (first) {
            m.firstToken.record(nanos, TimeUnit.NANOSECONDS);
            return;
        }
        long perToken = nanos / Math.max(1, tokens);
        for (long i = Math.min(tokens, MAX_TOKEN_SAMPLES); i > 0; i--) {
            m.interToken.record(perToken, TimeUnit.NANOSECONDS);
        }
    }

    @Override
    public void requestRejected(String model, Outcome outcome) {
        if (!stopped) {
            ModelMeters mm = of(model, 0);
            Outcome o = outcome == Outcome.SUCCESS ? Outcome.OTHER : outcome;
            if (mm.nv != null) {
                mm.nv.failure.get(o).increment();
            }
            if (mm.bp != null) {
                mm.bp.failures.get(o).increment();
            }
        }
    }

    @Override
    public void batchExecuted(String model, long version, int requests, int batchSize) {
        if (!stopped) {
            ModelMeters mm = of(model, version);
            if (mm.nv != null) {
                mm.nv.executions.increment();
                mm.nv.inferences.add(batchSize);
            }
            if (mm.bp != null) {
                mm.bp.batches.increment();
                mm.bp.batchSize.record(batchSize);
            }
        }
    }

    @Override
    public void instancesChanged(String model, long version, int instances) {
        if (!stopped) {
            of(model, version).instances.set(instances);
        }
    }

    @Override
    public void instanceRestarted(String model, long version, String instance) {
        if (!stopped) {
            BackplaneMeters m = of(model, version).bp;
            if (m != null) {
                m.restarts.increment();
            }
        }
    }

    @Override
    public void cacheLookup(String model, long version, boolean hit, long lookupNanos) {
        TritonMetrics t = triton;
        if (!stopped && t != null) {
            TritonMetrics.Series s = of(model, version).nv;
            if (s != null) {
                t.cacheLookup(s, hit, lookupNanos);
            }
        }
    }

    @Override
    public void cacheInserted(String model, long version, long insertNanos) {
        TritonMetrics t = triton;
        if (!stopped && t != null) {
            TritonMetrics.Series s = of(model, version).nv;
            if (s != null) {
                t.cacheInserted(s, insertNanos);
            }
        }
    }

    @Override
    public void duplicateReleaseSuppressed(String model, long version) {
        if (!stopped) {
            BackplaneMeters m = of(model, version).bp;
            if (m != null) {
                m.duplicates.increment();
            }
        }
    }
}
