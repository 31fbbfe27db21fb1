package io.backplane.core.batch;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.Ticker;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.config.TimeoutAction;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** Models, requests and clocks for the batching tests. */
final class BatchFixture {
    private BatchFixture() {
    }

    /** A hand-written context for a batcher tested alone: one instance of {@code config}, version 1, rejections to {@code reject}. */
    static io.backplane.spi.batch.BatcherContext context(ModelConfig config, Ticker ticker,
            java.util.function.BiConsumer<ScheduledRequest, BackplaneException> reject) {
        return new io.backplane.spi.batch.BatcherContext() {
            @Override
            public ModelConfig config() {
                return config;
            }

            @Override
            public long version() {
                return 1;
            }

            @Override
            public int instanceCount() {
                return 1;
            }

            @Override
            public Ticker ticker() {
                return ticker;
            }

            @Override
            public void reject(ScheduledRequest request, BackplaneException error) {
                reject.accept(request, error);
            }
        };
    }

    /** A clock the test moves by hand (scenario 11: deadlines read only the injected monotonic clock). */
    static final class FakeTicker implements Ticker {
        private final AtomicLong now = new AtomicLong(1_000_000_000L);

        @Override
        public long nanoTime() {
            return now.get();
        }

        void advance(Duration d) {
            now.addAndGet(d.toNanos());
        }
    }

    /** A batching model: IN and OUT INT64 [-1, 1]. */
    static ModelConfig.Builder model(String name, int maxBatch, DynamicBatching db, int instances) {
        return ModelConfig.builder(name).backend(ScriptedBackend.NAME).maxBatchSize(maxBatch).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).dynamicBatching(db)
                .instanceGroup(InstanceGroup.of("", instances, InstanceKind.CPU, List.of()));
    }

    static DynamicBatching dynamic(long delayMicros) {
        return DynamicBatching.builder().maxQueueDelayMicros(delayMicros).build();
    }

    static DynamicBatching dynamic(List<Integer> preferred, long delayMicros, boolean ordered, int levels, int defaultLevel, QueuePolicy policy,
            Map<Integer, QueuePolicy> perLevel) {
        return DynamicBatching.builder().preferredBatchSizes(preferred).maxQueueDelayMicros(delayMicros).preserveOrdering(ordered)
                .priorityLevels(levels).defaultPriorityLevel(defaultLevel).defaultQueuePolicy(policy).priorityQueuePolicy(perLevel).build();
    }

    static QueuePolicy policy(TimeoutAction action, long timeoutMicros, boolean allowOverride, int maxQueue) {
        return QueuePolicy.of(action, timeoutMicros, allowOverride, maxQueue);
    }

    static BackplaneHost.Builder host(ScriptedBackend backend) {
        return BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(2))
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50));
    }

    /** A request of {@code batch} items, each tagged {@code tag * 1000 + i}. */
    static InferenceRequest request(String model, long tag, int batch, int priority, long timeoutMicros) {
        long[] values = new long[batch];
        for (int i = 0; i < batch; i++) {
            values[i] = tag * 1000 + i;
        }
        return InferenceRequest.builder(model).input(Tensor.ofLongs("IN", new long[] {batch, 1}, values)).priority(priority).timeoutMicros(timeoutMicros)
                .build();
    }

    static InferenceRequest request(String model, long tag) {
        return request(model, tag, 1, 0, 0);
    }

    /** The tag of a request or response ({@code tag} of {@link #request}), checking every item carries it. */
    static long tagOf(long[] values) {
        long tag = values[0] / 1000;
        for (int i = 0; i < values.length; i++) {
            if (values[i] != tag * 1000 + i) {
                throw new AssertionError("items of one request carry different tags: " + java.util.Arrays.toString(values));
            }
        }
        return tag;
    }

    static long tagOf(ScheduledRequest r) {
        return tagOf(r.request().input("IN").toLongArray());
    }

    static long tagOf(InferenceResponse r) {
        return tagOf(r.output("OUT").toLongArray());
    }

    static List<Long> tags(List<ScheduledRequest> batch) {
        List<Long> out = new ArrayList<>(batch.size());
        for (ScheduledRequest r : batch) {
            out.add(tagOf(r));
        }
        return out;
    }

    static BackplaneException failure(CompletableFuture<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        return assertInstanceOf(BackplaneException.class, e.getCause());
    }
}
