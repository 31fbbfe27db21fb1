package io.backplane.core.testing;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.DataType;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A backend whose behaviour each test scripts per model, to misbehave on purpose. Counts every
 * lifecycle call so tests can check that nothing leaks.
 */
public final class ScriptedBackend implements BackendFactory {
    public static final String NAME = "scripted";

    /** What an instance does with a batch. */
    @FunctionalInterface
    public interface Script {
        void execute(List<ScheduledRequest> batch, InstanceContext instance) throws Exception;
    }

    /** Answers each request with its IN tensor renamed OUT. */
    public static final Script ECHO = (batch, inst) -> {
        for (ScheduledRequest r : batch) {
            r.sender().sendFinal(echo(r));
        }
    };

    private final Map<String, Script> scripts = new ConcurrentHashMap<>();
    public final AtomicInteger backendsCreated = new AtomicInteger();
    public final AtomicInteger backendsClosed = new AtomicInteger();
    public final AtomicInteger modelsLoaded = new AtomicInteger();
    public final AtomicInteger modelsClosed = new AtomicInteger();
    public final AtomicInteger instancesCreated = new AtomicInteger();
    public final AtomicInteger instancesClosed = new AtomicInteger();
    public volatile RuntimeException failLoad;
    public volatile RuntimeException failCreateInstance;
    public volatile RuntimeException failClose;
    public volatile boolean ready = true;
    /** The model file names {@link #capabilities()} declares (a folder holding one is this backend's); none by default. */
    public volatile java.util.List<String> modelFileNames = java.util.List.of();
    /** What {@link #capabilities()} declares of its models' execute (R1: only then the built-in warm-up runs without asking). */
    public volatile boolean sideEffectFree;
    /** What {@link #capabilities()} declares as the backend's own warm-up model; null: none. */
    public volatile io.backplane.spi.WarmupModel warmupModel;
    /** The instances' own readiness check ({@link ModelInstance#checkReady()}); null: they have none. */
    public volatile java.util.function.Supplier<java.util.concurrent.CompletionStage<Boolean>> readyCheck;
    /** When set, createInstance counts it down... then blocks (interruptibly) until {@link #releaseCreate} opens. */
    public volatile java.util.concurrent.CountDownLatch creating;
    public final java.util.concurrent.CountDownLatch releaseCreate = new java.util.concurrent.CountDownLatch(1);
    /** Runs first in {@code loadModel} (a backend opening its files there); null: nothing. */
    public volatile java.util.function.Consumer<ModelContext> onLoad;

    public ScriptedBackend on(String model, Script script) {
        scripts.put(model, script);
        return this;
    }

    public static InferenceResponse echo(ScheduledRequest r) {
        Tensor in = r.request().input("IN");
        return InferenceResponse.of(List.of(in.withName("OUT")));
    }

    /** A plain or decoupled model on this backend: input IN and output OUT, INT64 [1]. */
    public static ModelConfig model(String name, boolean decoupled) {
        return ModelConfig.builder(name).backend(NAME).decoupled(decoupled).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).build();
    }

    /** A request to {@code model} whose IN carries {@code tag}. */
    public static InferenceRequest request(String model, long tag) {
        return InferenceRequest.builder(model).input(Tensor.ofLongs("IN", new long[] {1}, tag)).build();
    }

    public static long tagOf(InferenceResponse r) {
        return r.output("OUT").toLongArray()[0];
    }

    @Override
    public io.backplane.spi.BackendCapabilities capabilities() {
        io.backplane.spi.BackendCapabilities.Builder b = io.backplane.spi.BackendCapabilities.builder().sideEffectFreeExecute(sideEffectFree)
                .modelFileNames(modelFileNames.toArray(String[]::new));
        io.backplane.spi.WarmupModel w = warmupModel;
        return (w == null ? b : b.warmupModel(w)).build();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Backend create(BackendContext context) {
        backendsCreated.incrementAndGet();
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                java.util.function.Consumer<ModelContext> hook = onLoad;
                if (hook != null) {
                    hook.accept(ctx);
                }
                RuntimeException f = failLoad;
                if (f != null) {
                    throw f;
                }
                modelsLoaded.incrementAndGet();
                String name = ctx.name();
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) throws InterruptedException {
                        java.util.concurrent.CountDownLatch c = creating;
                        if (c != null) {
                            c.countDown();
                            releaseCreate.await();
                        }
                        RuntimeException cf = failCreateInstance;
                        if (cf != null) {
                            throw cf;
                        }
                        instancesCreated.incrementAndGet();
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) throws Exception {
                                scripts.getOrDefault(name, ECHO).execute(batch, ictx);
                            }

                            @Override
                            public boolean isReady() {
                                return ready;
                            }

                            @Override
                            public java.util.concurrent.CompletionStage<Boolean> checkReady() {
                                java.util.function.Supplier<java.util.concurrent.CompletionStage<Boolean>> c = readyCheck;
                                if (c == null) {
                                    return ModelInstance.super.checkReady();
                                }
                                return c.get();
                            }

                            @Override
                            public void close() {
                                instancesClosed.incrementAndGet();
                                RuntimeException c = failClose;
                                if (c != null) {
                                    throw c;
                                }
                            }
                        };
                    }

                    @Override
                    public void close() {
                        modelsClosed.incrementAndGet();
                    }
                };
            }

            @Override
            public void close() {
                backendsClosed.incrementAndGet();
            }
        };
    }
}
