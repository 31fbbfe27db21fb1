package io.backplane.testkit;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A small backend for the kit's own tests: a plain model echoes IN (INT64) as OUT; a decoupled
 * model streams OUT = IN·10 + i for i = 0, 1, 2 from its instance's own thread after execute
 * returned. Each {@link Fault} breaks one rule on purpose.
 */
final class ToyBackend implements BackendFactory {
    static final String NAME = "toy";

    enum Fault {
        /** Sends FINAL twice and swallows the IllegalStateException (L2). */
        DOUBLE_FINAL,
        /** Decoupled: sends a response after FINAL (L2). */
        SEND_AFTER_FINAL,
        /** Plain: returns from execute without answering (L6). */
        NO_ANSWER,
        /** Decoupled: never sends FINAL (L1). */
        NEVER_ENDS,
        /** Answers each request with the previous request's payload (L1 routing). */
        WRONG_ROUTING,
        /** Stays inside execute after FINAL until interrupted (L3). */
        LINGER_AFTER_FINAL,
        /** After one failing request, fails every later one (L5). */
        POISONED_AFTER_ERROR,
        /** Fails the whole batch when one request in it is bad (L5). */
        FAIL_WHOLE_BATCH,
        /** Refuses to load a model whose previous Model is still open (L9). */
        RELOAD_FAILS,
        /** loadModel is not safe to run concurrently: it fails when another load is in progress (L9). */
        LOAD_NOT_CONCURRENT,
        /** Starts a thread in create() and never stops it (L10). */
        LEAK_THREAD,
        /** Ignores isCancelled() although CANCELLATION is declared (B6). */
        IGNORE_CANCEL,
        /** Instances never report ready (L8). */
        NOT_READY,
        /** ModelInstance.close() blocks until released (L7). */
        CLOSE_BLOCKS,
        /** Decoupled: answers inside execute although DECOUPLED_STREAMING is declared. */
        ANSWER_INLINE,
        /** Loads any config, including GPU instance groups and decoupled ones it should refuse. */
        ACCEPT_EVERYTHING
    }

    /** Released by tests after a run with LEAK_THREAD, CLOSE_BLOCKS or LINGER_AFTER_FINAL, so nothing outlives them. */
    static volatile CountDownLatch release = new CountDownLatch(1);

    private final Set<Fault> faults;
    private final AtomicLong lastPayload = new AtomicLong(-1);
    private final Set<String> openModels = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean poisoned = new AtomicBoolean();
    private final java.util.concurrent.atomic.AtomicInteger loading = new java.util.concurrent.atomic.AtomicInteger();

    ToyBackend(Set<Fault> faults) {
        this.faults = faults.isEmpty() ? EnumSet.noneOf(Fault.class) : EnumSet.copyOf(faults);
    }

    static ModelConfig plain() {
        return ModelConfig.builder("echo").backend(NAME).maxBatchSize(8).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).build();
    }

    static ModelConfig decoupled() {
        return ModelConfig.builder("echo_stream").backend(NAME).decoupled(true).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).build();
    }

    static InferenceRequest request(ModelConfig c, long tag) {
        long[] shape = c.batches() ? new long[] {1, 1} : new long[] {1};
        return InferenceRequest.builder(c.name()).input(Tensor.ofLongs("IN", shape, tag)).build();
    }

    static InferenceRequest failing(ModelConfig c, long tag) {
        return request(c, tag).toBuilder().parameter("fail", true).build();
    }

    static long in(InferenceRequest r) {
        return r.input("IN").toLongArray()[0];
    }

    static ConformanceModel model(ModelConfig c) {
        return ConformanceModel.builder(c).request(tag -> request(c, tag)).failingRequest(tag -> failing(c, tag)).check((req, responses) -> {
            long in = in(req);
            List<Long> got = responses.stream().map(r -> r.output("OUT").toLongArray()[0]).toList();
            List<Long> want = c.decoupled() ? List.of(in * 10, in * 10 + 1, in * 10 + 2) : List.of(in);
            if (!got.equals(want)) {
                throw new AssertionError("OUT " + got + ", expected " + want + " for IN " + in);
            }
        }).build();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Backend create(BackendContext context) {
        if (faults.contains(Fault.LEAK_THREAD)) {
            CountDownLatch r = release;
            Thread.ofPlatform().name("toy-leaky").start(() -> {
                try {
                    r.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) throws InterruptedException {
                if (faults.contains(Fault.LOAD_NOT_CONCURRENT)) {
                    try {
                        if (loading.incrementAndGet() > 1) {
                            throw new IllegalStateException("toy is already loading a model");
                        }
                        Thread.sleep(300); // a slow load: the kit's concurrent loads overlap it
                    } finally {
                        loading.decrementAndGet();
                    }
                }
                ModelConfig c = ctx.config();
                if (!faults.contains(Fault.ACCEPT_EVERYTHING) && c.instanceGroups().stream().anyMatch(g -> g.kind() == InstanceKind.GPU)) {
                    throw new BackplaneException(ErrorCode.UNSUPPORTED, "toy runs on CPU only; model '" + ctx.name() + "' asks for KIND_GPU");
                }
                if (faults.contains(Fault.RELOAD_FAILS) && !openModels.add(ctx.name())) {
                    throw new IllegalStateException("model '" + ctx.name() + "' is already loaded");
                }
                openModels.add(ctx.name());
                return new ToyModel(ctx);
            }

            @Override
            public void close() {
            }
        };
    }

    private final class ToyModel implements Model {
        private final ModelContext ctx;

        ToyModel(ModelContext ctx) {
            this.ctx = ctx;
        }

        @Override
        public ModelInstance createInstance(InstanceContext instance) {
            return new ToyInstance(ctx.config(), instance.name());
        }

        @Override
        public void close() {
            if (!faults.contains(Fault.RELOAD_FAILS)) {
                openModels.remove(ctx.name());
            }
        }
    }

    private final class ToyInstance implements ModelInstance {
        private final ModelConfig config;
        private final ExecutorService streamer;

        ToyInstance(ModelConfig config, String name) {
            this.config = config;
            this.streamer = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().name("toy-" + name).unstarted(r));
        }

        @Override
        public void execute(List<ScheduledRequest> batch) throws Exception {
            boolean batchHasBad = batch.stream().anyMatch(r -> Boolean.TRUE.equals(r.request().parameters().get("fail")));
            for (ScheduledRequest r : batch) {
                ResponseSender s = r.sender();
                if (r.isCancelled() && !faults.contains(Fault.IGNORE_CANCEL)) {
                    s.sendError(new BackplaneException(ErrorCode.CANCELLED, "toy saw request " + r.id() + " cancelled"));
                    continue;
                }
                boolean bad = Boolean.TRUE.equals(r.request().parameters().get("fail"));
                if (bad || (faults.contains(Fault.FAIL_WHOLE_BATCH) && batchHasBad) || (faults.contains(Fault.POISONED_AFTER_ERROR) && poisoned.get())) {
                    poisoned.set(true);
                    s.sendError(BackplaneException.invalid("toy was asked to fail request " + r.id()));
                    continue;
                }
                if (faults.contains(Fault.NO_ANSWER)) {
                    continue;
                }
                long in = in(r.request());
                long payload = faults.contains(Fault.WRONG_ROUTING) ? lastPayload.getAndSet(in) : in;
                if (config.decoupled()) {
                    if (faults.contains(Fault.ANSWER_INLINE)) {
                        stream(r, payload);
                    } else {
                        streamer.execute(() -> stream(r, payload));
                    }
                } else {
                    s.sendFinal(out(r, payload));
                    if (faults.contains(Fault.DOUBLE_FINAL)) {
                        try {
                            s.sendFinal(out(r, payload));
                        } catch (IllegalStateException swallowed) {
                            // the bug: ignoring that the sender is closed
                        }
                    }
                }
            }
            if (faults.contains(Fault.LINGER_AFTER_FINAL)) {
                release.await();
            }
        }

        private void stream(ScheduledRequest r, long payload) {
            ResponseSender s = r.sender();
            for (int i = 0; i < 3; i++) {
                s.send(InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1}, payload * 10 + i))), 0);
            }
            if (faults.contains(Fault.NEVER_ENDS)) {
                return;
            }
            s.send(null, ResponseSender.FINAL);
            if (faults.contains(Fault.SEND_AFTER_FINAL)) {
                try {
                    s.send(InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1}, payload))), 0);
                } catch (IllegalStateException swallowed) {
                    // the bug
                }
            }
        }

        private InferenceResponse out(ScheduledRequest r, long payload) {
            long[] shape = config.batches() ? new long[] {1, 1} : new long[] {1};
            return InferenceResponse.of(List.of(Tensor.ofLongs("OUT", shape, payload)));
        }

        @Override
        public boolean isReady() {
            return !faults.contains(Fault.NOT_READY);
        }

        @Override
        public void close() {
            streamer.shutdown();
            try {
                if (faults.contains(Fault.CLOSE_BLOCKS)) {
                    release.await();
                }
                streamer.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
