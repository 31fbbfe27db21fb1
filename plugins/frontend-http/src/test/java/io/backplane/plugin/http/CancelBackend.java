package io.backplane.plugin.http;

import io.backplane.core.BackplaneHost;
import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.InstanceContext;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import io.backplane.spi.ModelInstance;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.HostListener;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Test backend "cancellable": models that run until their client goes away, so that a frontend
 * test can see a real disconnect reach the backend as {@link ScheduledRequest#isCancelled()}
 * (DESIGN R2, B6). One instance each.
 * <ul>
 *   <li>{@link #waiting}: plain, {@code IN0} FP32 [-1] to {@code OUT0}. Execute puts the request's
 *       tag ({@code IN0[0]} as an integer) in {@link #started}, then polls the request until it is
 *       cancelled (the tag goes to {@link #cancelled}, the request ends with CANCELLED) or the test
 *       opens {@link #release} (the request is answered with its input).
 *   <li>{@link #tokens}: decoupled, {@code text_input} BYTES [1] to {@code text_output}. Execute
 *       puts the text in {@link #started}, then sends {@code "token i"} as fast as the request's
 *       flow control lets it until the request is cancelled; then {@code "<text> after <n>"} goes to
 *       {@link #cancelled} and the request ends with CANCELLED.
 * </ul>
 * A model that waits longer than {@link #PATIENCE_SECONDS} ends its request with an error and
 * notes it in {@link #problems}, so a lost cancellation fails the test instead of hanging it.
 */
public final class CancelBackend implements BackendFactory {
    public static final String NAME = "cancellable";
    public static final long PATIENCE_SECONDS = 60;

    /** The tag of every request that reached execute, in order. */
    public final BlockingQueue<String> started = new LinkedBlockingQueue<>();
    /** The tag of every request whose execute saw it cancelled. */
    public final BlockingQueue<String> cancelled = new LinkedBlockingQueue<>();
    /** Opened by the test: every waiting request (now and later) is answered. */
    public final CountDownLatch release = new CountDownLatch(1);
    /** What went wrong inside the models (waited past their patience). */
    public final List<String> problems = new CopyOnWriteArrayList<>();

    @Override
    public String name() {
        return NAME;
    }

    public static ModelConfig waiting(String name) {
        return ModelConfig.builder(name).backend(NAME).input(TensorConfig.of("IN0", DataType.FP32, -1)).output(TensorConfig.of("OUT0", DataType.FP32, -1))
                .parameter("mode", "wait").build();
    }

    public static ModelConfig tokens(String name) {
        return ModelConfig.builder(name).backend(NAME).decoupled(true).input(TensorConfig.of("text_input", DataType.BYTES, 1))
                .output(TensorConfig.of("text_output", DataType.BYTES, 1)).parameter("mode", "tokens").build();
    }

    /**
     * A host of this backend with a {@link #waiting} model "wait" and a {@link #tokens} model
     * "tokens", both loaded, an unload timeout of 5 s, every request's outcome reported to
     * {@code outcomes}. The caller closes it.
     */
    public BackplaneHost host(Outcomes outcomes) {
        BackplaneHost host = BackplaneHost.builder().backend(this).unloadTimeout(Duration.ofSeconds(5)).model(waiting("wait")).model(tokens("tokens"))
                .loadModel("wait").loadModel("tokens").build();
        host.addListener(outcomes);
        return host;
    }

    @Override
    public Backend create(BackendContext context) {
        return new Backend() {
            @Override
            public Model loadModel(ModelContext ctx) {
                boolean tokens = ctx.config().parameters().getOrDefault("mode", "wait").equals("tokens");
                return new Model() {
                    @Override
                    public ModelInstance createInstance(InstanceContext ictx) {
                        return new ModelInstance() {
                            @Override
                            public void execute(List<ScheduledRequest> batch) throws Exception {
                                for (ScheduledRequest r : batch) {
                                    if (tokens) {
                                        stream(r);
                                    } else {
                                        hold(r);
                                    }
                                }
                            }

                            @Override
                            public void close() {
                            }
                        };
                    }

                    @Override
                    public void close() {
                    }
                };
            }

            @Override
            public void close() {
            }
        };
    }

    private void hold(ScheduledRequest r) throws InterruptedException {
        Tensor in = Objects.requireNonNull(r.request().input("IN0"), "IN0 is missing");
        String tag = Integer.toString((int) in.toFloatArray()[0]);
        started.add(tag);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(PATIENCE_SECONDS);
        while (!r.isCancelled()) {
            // a backend has no cancellation callback: it looks at isCancelled between steps of its work
            if (release.await(1, TimeUnit.MILLISECONDS)) {
                r.sender().sendFinal(InferenceResponse.of(List.of(in.withName("OUT0"))));
                return;
            }
            if (System.nanoTime() > deadline) {
                giveUp(r, "request " + tag + " was neither cancelled nor released within " + PATIENCE_SECONDS + " s");
                return;
            }
        }
        cancelled.add(tag);
        r.sender().sendError(new BackplaneException(ErrorCode.CANCELLED, "request " + tag + " saw its cancellation"));
    }

    private void stream(ScheduledRequest r) throws InterruptedException {
        String tag = new String(Objects.requireNonNull(r.request().input("text_input"), "text_input is missing").toBytesList().get(0), StandardCharsets.UTF_8);
        started.add(tag);
        ResponseSender sender = r.sender();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(PATIENCE_SECONDS);
        int n = 0;
        while (!r.isCancelled()) {
            try {
                // P9: a client that stops reading holds the model here until it reads or goes away
                sender.ready().toCompletableFuture().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
                giveUp(r, "stream " + tag + " was not cancelled within " + PATIENCE_SECONDS + " s; it sent " + n + " tokens (" + e + ")");
                return;
            }
            if (r.isCancelled()) {
                break;
            }
            sender.send(InferenceResponse.of(List.of(Tensor.ofStrings("text_output", new long[] {1}, "token " + n))), 0);
            n++;
        }
        cancelled.add(tag + " after " + n);
        sender.sendError(new BackplaneException(ErrorCode.CANCELLED, "stream " + tag + " saw its cancellation after " + n + " tokens"));
    }

    private void giveUp(ScheduledRequest r, String problem) {
        problems.add(problem);
        r.sender().sendError(new BackplaneException(ErrorCode.INTERNAL, problem));
    }

    /**
     * Counts, per model, the requests the host accepted and how each ended (a {@link HostListener}
     * added to the host): a test's handshake that a request is queued, and its proof that one
     * ended without ever being dispatched.
     */
    public static final class Outcomes implements HostListener {
        /** How one request ended; {@code dispatched} false when it never left the queue. */
        public record Ended(String model, Outcome outcome, boolean dispatched) {
        }

        private final Map<String, AtomicInteger> accepted = new ConcurrentHashMap<>();
        public final BlockingQueue<Ended> ended = new LinkedBlockingQueue<>();

        @Override
        public void requestAccepted(String model, long version) {
            accepted.computeIfAbsent(model, m -> new AtomicInteger()).incrementAndGet();
        }

        @Override
        public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
            ended.add(new Ended(model, outcome, computeNanos > 0)); // the core reports no compute time for a request never dispatched
        }

        public int accepted(String model) {
            AtomicInteger n = accepted.get(model);
            return n == null ? 0 : n.get();
        }

        /** Waits until the host has accepted {@code n} requests for {@code model}. */
        public void awaitAccepted(String model, int n) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (accepted(model) < n) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the host accepted " + accepted(model) + " requests for '" + model + "' within 30 s, not " + n);
                }
                Thread.sleep(5);
            }
        }

        /** The next request that ended, within 30 s. */
        public Ended next() throws InterruptedException {
            Ended e = ended.poll(30, TimeUnit.SECONDS);
            if (e == null) {
                throw new AssertionError("no request ended within 30 s");
            }
            return e;
        }
    }
}
