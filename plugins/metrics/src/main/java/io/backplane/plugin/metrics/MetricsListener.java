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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Turns host events into meters, per model and version. Meters are created once per model
 * version and cached, so the hot path is a map lookup and an increment. After {@link #stop()}
 * events are ignored (the SPI has no way to remove a listener).
 *
 * <p>Meters (Prometheus names):
 * <ul>
 *   <li>{@code backplane_inference_success_total{model,version}}
 *   <li>{@code backplane_inference_failure_total{model,version,reason}}, reason one of
 *       {@code rejected}, {@code canceled}, {@code backend}, {@code other}; requests rejected
 *       before acceptance (unknown model, bad input) carry {@code version="none"}
 *   <li>{@code backplane_inference_queue_duration_seconds{model,version}} (histogram)
 *   <li>{@code backplane_inference_compute_duration_seconds{model,version}} (histogram)
 *   <li>{@code backplane_inference_inflight_requests{model,version}} (gauge)
 *   <li>{@code backplane_inference_batches_total{model,version}} and
 *       {@code backplane_inference_batch_size{model,version}} (summary)
 *   <li>{@code backplane_instance_restarts_total{model,version}}
 *   <li>{@code backplane_duplicate_releases_total{model,version}} (L4 suppressed second releases)
 * </ul>
 */
final class MetricsListener implements HostListener {
    private final MeterRegistry registry;
    private final Map<Key, ModelMeters> meters = new ConcurrentHashMap<>();
    private volatile boolean stopped;
    static final int MAX_SERIES = 1024;

    MetricsListener(MeterRegistry registry) {
        this.registry = registry;
    }

    void stop() {
        stopped = true;
    }

    private record Key(String model, long version) {
    }

    private final class ModelMeters {
        final Counter success;
        final Map<Outcome, Counter> failures = new EnumMap<>(Outcome.class);
        final Timer queue;
        final Timer compute;
        final AtomicLong inFlight = new AtomicLong();
        final Counter batches;
        final DistributionSummary batchSize;
        final Counter restarts;
        final Counter duplicates;

        ModelMeters(String model, String version) {
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
            batches = Counter.builder("backplane.inference.batches").description("Batches dispatched to instances")
                    .tags("model", model, "version", version).register(registry);
            batchSize = DistributionSummary.builder("backplane.inference.batch.size").description("Batch size along the batch dimension")
                    .tags("model", model, "version", version).register(registry);
            restarts = Counter.builder("backplane.instance.restarts").description("Instances replaced after a failure")
                    .tags("model", model, "version", version).register(registry);
            duplicates = Counter.builder("backplane.duplicate.releases").description("Second releases of an ended request, suppressed (L4)")
                    .tags("model", model, "version", version).register(registry);
        }
    }

    private ModelMeters of(String model, long version) {
        Key k = new Key(model, version);
        ModelMeters m = meters.get(k);
        if (m == null) {
            if (meters.size() >= MAX_SERIES) {
                // Bounded cardinality: clients can name any model, so unknown names share one series.
                k = new Key("_other", 0);
            }
            m = meters.computeIfAbsent(k, key -> new ModelMeters(key.model(), key.version() > 0 ? Long.toString(key.version()) : "none"));
        }
        return m;
    }

    @Override
    public void requestAccepted(String model, long version) {
        if (!stopped) {
            of(model, version).inFlight.incrementAndGet();
        }
    }

    @Override
    public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
        if (stopped) {
            return;
        }
        ModelMeters m = of(model, version);
        m.inFlight.decrementAndGet();
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
    public void requestRejected(String model, Outcome outcome) {
        if (!stopped) {
            ModelMeters m = of(model, 0);
            (outcome == Outcome.SUCCESS ? m.failures.get(Outcome.OTHER) : m.failures.get(outcome)).increment();
        }
    }

    @Override
    public void batchExecuted(String model, long version, int requests, int batchSize) {
        if (!stopped) {
            ModelMeters m = of(model, version);
            m.batches.increment();
            m.batchSize.record(batchSize);
        }
    }

    @Override
    public void instanceRestarted(String model, long version, String instance) {
        if (!stopped) {
            of(model, version).restarts.increment();
        }
    }

    @Override
    public void duplicateReleaseSuppressed(String model, long version) {
        if (!stopped) {
            of(model, version).duplicates.increment();
        }
    }
}
