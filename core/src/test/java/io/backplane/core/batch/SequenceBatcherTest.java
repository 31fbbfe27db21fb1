package io.backplane.core.batch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.core.testing.Hygiene;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.SequenceBatching;
import io.backplane.spi.config.SequenceBatching.Control;
import io.backplane.spi.config.SequenceBatching.ControlKind;
import io.backplane.spi.config.TensorConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The sequence batcher through a real host: slots, controls, idle release, backlog, instance
 * failure, unload, implicit state, and many sequences interleaved over fewer slots. The scripted
 * model folds each sequence's inputs with a non-commutative step ({@link #step}), keyed by the
 * CORRID control (like Triton's {@code sequence_py}), so a response matches only its own
 * sequence's inputs in their own order.
 */
@Timeout(120)
class SequenceBatcherTest {
    private static final long MOD = 1_000_000_007L;
    private final ScriptedBackend backend = new ScriptedBackend();
    private BackplaneHost host;

    @AfterEach
    void close() {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests());
            assertEquals(0, host.sequenceSlotsInUse());
        }
        Hygiene.assertNoBackplaneThreads();
    }

    /** Waits, up to a deadline, for the worker to settle the slots of executions that already answered. */
    private void awaitNoSlots() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (host.sequenceSlotsInUse() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(0, host.sequenceSlotsInUse());
    }

    static long step(long state, long in) {
        return (state * 31 + in) % MOD;
    }

    private static SequenceBatching.Builder sequences(SequenceBatching.Strategy strategy) {
        return SequenceBatching.builder().strategy(strategy).maxSequenceIdleMicros(60_000_000)
                .control(new Control("START", ControlKind.CONTROL_SEQUENCE_START, DataType.INT32, List.of(0.0, 1.0)))
                .control(new Control("END", ControlKind.CONTROL_SEQUENCE_END, DataType.FP32, List.of(0.0, 1.0)))
                .control(new Control("READY", ControlKind.CONTROL_SEQUENCE_READY, DataType.BOOL, List.of(0.0, 1.0)))
                .control(new Control("CORRID", ControlKind.CONTROL_SEQUENCE_CORRID, DataType.UINT64, List.of()));
    }

    private static ModelConfig model(String name, int maxBatch, int instances, SequenceBatching sb) {
        return ModelConfig.builder(name).backend(ScriptedBackend.NAME).maxBatchSize(maxBatch).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).sequenceBatching(sb)
                .instanceGroup(InstanceGroup.of("", instances, InstanceKind.CPU, List.of())).build();
    }

    private BackplaneHost.Builder hostBuilder() {
        return BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(2))
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50));
    }

    /** A stateful model keyed by CORRID; records violations instead of throwing inside execute. */
    private static final class Accumulator implements ScriptedBackend.Script {
        final Map<Long, Long> state = new ConcurrentHashMap<>();
        final ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        final ConcurrentLinkedQueue<String> controls = new ConcurrentLinkedQueue<>();
        final AtomicInteger maxBatch = new AtomicInteger();

        @Override
        public void execute(List<ScheduledRequest> batch, io.backplane.spi.InstanceContext instance) {
            maxBatch.accumulateAndGet(batch.size(), Math::max);
            List<Long> seen = new ArrayList<>();
            for (ScheduledRequest r : batch) {
                InferenceRequest q = r.request();
                boolean start = q.input("START").toIntArray()[0] == 1;
                boolean end = q.input("END").toFloatArray()[0] == 1f;
                boolean ready = q.input("READY").toBooleanArray()[0];
                long corr = q.input("CORRID").toLongArray()[0];
                controls.add(corr + ":" + (start ? "S" : "") + (end ? "E" : "") + (ready ? "R" : ""));
                if (seen.contains(corr)) {
                    violations.add("sequence " + corr + " twice in one batch");
                }
                seen.add(corr);
                long in = q.input("IN").toLongArray()[0];
                Long prev = start ? Long.valueOf(0) : state.get(corr);
                if (prev == null) {
                    violations.add("sequence " + corr + " continued without a start");
                    prev = 0L;
                }
                long next = step(prev, in);
                if (end) {
                    state.remove(corr);
                } else {
                    state.put(corr, next);
                }
                r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1, 1}, next))));
            }
        }
    }

    private static InferenceRequest req(String model, long corr, long in, boolean start, boolean end) {
        return InferenceRequest.builder(model).input(Tensor.ofLongs("IN", new long[] {1, 1}, in)).correlationId(corr).sequenceStart(start)
                .sequenceEnd(end).build();
    }

    private static long out(CompletableFuture<InferenceResponse> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS).output("OUT").toLongArray()[0];
    }

    private static BackplaneException failure(CompletableFuture<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS));
        return assertInstanceOf(BackplaneException.class, e.getCause());
    }

    @Test
    void direct_controlsAreFilledPerRequest_andTheSlotIsReleasedAtTheEnd() throws Exception {
        Accumulator acc = new Accumulator();
        backend.on("acc", acc);
        host = hostBuilder().model(model("acc", 2, 1, sequences(SequenceBatching.Strategy.DIRECT).build())).loadModel("acc").build();
        assertEquals(step(0, 5), out(host.infer(req("acc", 7, 5, true, false))));
        assertEquals(1, host.sequenceSlotsInUse());
        assertEquals(step(step(0, 5), 6), out(host.infer(req("acc", 7, 6, false, false))));
        assertEquals(step(step(step(0, 5), 6), 1), out(host.infer(req("acc", 7, 1, false, true))));
        assertEquals(List.of("7:SR", "7:R", "7:ER"), List.copyOf(acc.controls));
        assertEquals(0, host.sequenceSlotsInUse());
        assertTrue(acc.violations.isEmpty(), acc.violations.toString());
    }

    @Test
    void requestWithoutStart_forAnUnknownId_failsNamingTheId() {
        backend.on("acc", new Accumulator());
        host = hostBuilder().model(model("acc", 2, 1, sequences(SequenceBatching.Strategy.DIRECT).build())).loadModel("acc").build();
        BackplaneException e = failure(host.infer(req("acc", 42, 1, false, false)));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("sequence 42 of model 'acc' is unknown") && e.getMessage().contains("sequence_start"), e.getMessage());
        BackplaneException none = failure(host.infer(InferenceRequest.builder("acc").input(Tensor.ofLongs("IN", new long[] {1, 1}, 1)).build()));
        assertTrue(none.getMessage().contains("needs a sequence id"), none.getMessage());
        assertEquals(0, host.sequenceSlotsInUse());
    }

    @Test
    void stringIds_andNumericIds_areDifferentSequences() throws Exception {
        ScriptedBackend.Script echoCorr = (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                List<String> id = r.request().input("CORRID").toStringList();
                r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1, 1}, id.getFirst().length()))));
            }
        };
        backend.on("strid", echoCorr);
        SequenceBatching sb = SequenceBatching.builder().control(new Control("CORRID", ControlKind.CONTROL_SEQUENCE_CORRID, DataType.BYTES, List.of()))
                .build();
        host = hostBuilder().model(model("strid", 2, 1, sb)).loadModel("strid").build();
        InferenceRequest.Builder s = InferenceRequest.builder("strid").input(Tensor.ofLongs("IN", new long[] {1, 1}, 1)).correlationId("abcde");
        assertEquals(5, out(host.infer(s.sequenceStart(true).build())));
        assertEquals(5, out(host.infer(s.sequenceStart(false).build())));
        // the number 7 is not the string "7"
        assertEquals(1, out(host.infer(InferenceRequest.builder("strid").input(Tensor.ofLongs("IN", new long[] {1, 1}, 1)).correlationId("7")
                .sequenceStart(true).build())));
        BackplaneException e = failure(host.infer(req("strid", 7, 1, false, false)));
        assertTrue(e.getMessage().contains("sequence 7 of model 'strid' is unknown"), e.getMessage());
        assertEquals(2, host.sequenceSlotsInUse());
    }

    @Test
    void idleSequence_isReleased_andItsNextRequestFailsNamingTheId() throws Exception {
        BatchFixture.FakeTicker clock = new BatchFixture.FakeTicker();
        backend.on("acc", new Accumulator());
        SequenceBatching sb = sequences(SequenceBatching.Strategy.DIRECT).maxSequenceIdleMicros(1_000).build();
        host = hostBuilder().ticker(clock).model(model("acc", 1, 1, sb)).loadModel("acc").build();
        out(host.infer(req("acc", 9, 1, true, false)));
        assertEquals(1, host.sequenceSlotsInUse());
        clock.advance(Duration.ofMillis(2));
        BackplaneException e = failure(host.infer(req("acc", 9, 2, false, false)));
        assertTrue(e.getMessage().contains("sequence 9 of model 'acc' was idle for more than 1000 µs"), e.getMessage());
        assertEquals(0, host.sequenceSlotsInUse());
        // a new start with the same id begins afresh
        assertEquals(step(0, 3), out(host.infer(req("acc", 9, 3, true, true))));
        assertEquals(0, host.sequenceSlotsInUse());
    }

    @Test
    void allSlotsTaken_newSequenceWaitsInTheBacklog_untilASlotFrees() throws Exception {
        Accumulator acc = new Accumulator();
        backend.on("acc", acc);
        host = hostBuilder().model(model("acc", 1, 1, sequences(SequenceBatching.Strategy.DIRECT).build())).loadModel("acc").build();
        out(host.infer(req("acc", 1, 1, true, false)));
        CompletableFuture<InferenceResponse> waiting = host.infer(req("acc", 2, 2, true, false));
        CompletableFuture<InferenceResponse> more = host.infer(req("acc", 2, 3, false, true));
        // sequence 1 holds the only slot; sequence 2 cannot run until it ends
        assertEquals(step(step(0, 1), 4), out(host.infer(req("acc", 1, 4, false, true))));
        assertEquals(step(0, 2), out(waiting));
        assertEquals(step(step(0, 2), 3), out(more));
        assertEquals(0, host.sequenceSlotsInUse());
        assertTrue(acc.violations.isEmpty(), acc.violations.toString());
    }

    @Test
    void instanceFailure_endsItsSequences_withAClearErrorForTheNextRequest() throws Exception {
        CountDownLatch failedOnce = new CountDownLatch(1);
        Accumulator acc = new Accumulator();
        backend.on("acc", (batch, inst) -> {
            if (batch.getFirst().request().input("IN").toLongArray()[0] == -1) {
                inst.reportFailure(new IllegalStateException("device lost"));
                failedOnce.countDown();
                return;
            }
            acc.execute(batch, inst);
        });
        host = hostBuilder().model(model("acc", 1, 1, sequences(SequenceBatching.Strategy.DIRECT).build())).loadModel("acc").build();
        out(host.infer(req("acc", 5, 1, true, false)));
        BackplaneException crash = failure(host.infer(req("acc", 5, -1, false, false)));
        assertEquals(ErrorCode.UNAVAILABLE, crash.code());
        assertTrue(failedOnce.await(10, TimeUnit.SECONDS));
        BackplaneException next = failure(host.infer(req("acc", 5, 2, false, false)));
        assertTrue(next.getMessage().contains("sequence 5 of model 'acc' lost its state when instance 0 of the model failed"), next.getMessage());
        assertEquals(0, host.sequenceSlotsInUse());
    }

    @Test
    void unloadAndReload_endsTheSequence_itsNextRequestIsAnError() throws Exception {
        backend.on("acc", new Accumulator());
        host = hostBuilder().model(model("acc", 1, 1, sequences(SequenceBatching.Strategy.OLDEST).build())).loadModel("acc").build();
        out(host.infer(req("acc", 3, 1, true, false)));
        host.unload("acc");
        assertEquals(0, host.sequenceSlotsInUse());
        host.load("acc");
        BackplaneException e = failure(host.infer(req("acc", 3, 2, false, false)));
        assertTrue(e.getMessage().contains("sequence 3 of model 'acc' is unknown") && e.getMessage().contains("unloaded"), e.getMessage());
    }

    @Test
    void implicitState_carriesTheStateOutputToTheNextRequest_andHidesIt() throws Exception {
        backend.on("implicit", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                long s = r.request().input("STATE_IN").toLongArray()[0];
                long next = step(s, r.request().input("IN").toLongArray()[0]);
                r.sender().sendFinal(InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1, 1}, next),
                        Tensor.ofLongs("STATE_OUT", new long[] {1, 1}, next))));
            }
        });
        SequenceBatching sb = SequenceBatching.builder().state(new SequenceBatching.State("STATE_IN", "STATE_OUT", DataType.INT64, List.of(1L),
                List.of(new SequenceBatching.InitialState("zero", DataType.INT64, List.of(1L), null)))).build();
        host = hostBuilder().model(model("implicit", 2, 1, sb)).loadModel("implicit").build();
        InferenceResponse first = host.infer(req("implicit", 1, 4, true, false)).get(30, TimeUnit.SECONDS);
        assertNull(first.output("STATE_OUT"));
        assertEquals(step(0, 4), first.output("OUT").toLongArray()[0]);
        assertEquals(step(step(0, 4), 5), out(host.infer(req("implicit", 1, 5, false, false))));
        // a restart begins from the initial state again
        assertEquals(step(0, 6), out(host.infer(req("implicit", 1, 6, true, true))));
    }

    @Test
    void iterativeSequence_requestIsRescheduledUntilDone_eachIterationOnItsSlot() throws Exception {
        Map<Long, Long> remaining = new ConcurrentHashMap<>();
        AtomicInteger executions = new AtomicInteger();
        backend.on("iter", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                executions.incrementAndGet();
                long left = remaining.computeIfAbsent(r.id(), k -> r.request().input("IN").toLongArray()[0]) - 1;
                remaining.put(r.id(), left);
                InferenceResponse out = InferenceResponse.of(List.of(Tensor.ofLongs("OUT", new long[] {1}, left)));
                if (left > 0) {
                    r.sender().send(out, 0);
                    r.reschedule();
                } else {
                    r.sender().sendFinal(out);
                }
            }
        });
        ModelConfig config = ModelConfig.builder("iter").backend(ScriptedBackend.NAME).decoupled(true).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).sequenceBatching(SequenceBatching.builder().iterative(true).build()).build();
        host = hostBuilder().model(config).loadModel("iter").build();
        List<ConcurrentLinkedQueue<Long>> streams = new ArrayList<>();
        List<CompletableFuture<Void>> ends = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            ConcurrentLinkedQueue<Long> got = new ConcurrentLinkedQueue<>();
            CompletableFuture<Void> end = new CompletableFuture<>();
            streams.add(got);
            ends.add(end);
            // requests without a sequence id: each is an iterative sequence of its own, sharing the one slot
            host.stream(InferenceRequest.builder("iter").input(Tensor.ofLongs("IN", new long[] {1}, 3 + n)).build(),
                    new io.backplane.spi.host.ResponseObserver() {
                        @Override
                        public void onResponse(InferenceResponse response) {
                            got.add(response.output("OUT").toLongArray()[0]);
                        }

                        @Override
                        public void onComplete() {
                            end.complete(null);
                        }

                        @Override
                        public void onError(BackplaneException error) {
                            end.completeExceptionally(error);
                        }
                    });
        }
        for (int n = 0; n < 3; n++) {
            ends.get(n).get(30, TimeUnit.SECONDS);
            List<Long> expected = new ArrayList<>();
            for (long v = 3 + n - 1; v >= 0; v--) {
                expected.add(v);
            }
            assertEquals(expected, List.copyOf(streams.get(n)));
        }
        assertEquals(3 + 4 + 5, executions.get());
        // the last iteration's slot is released when its execute has returned, which may be just after its FINAL reached us
        awaitNoSlots();
    }

    @Test
    void manySequences_interleavedOverFewerSlots_everyResponseMatchesItsOwnSequence() throws Exception {
        for (SequenceBatching.Strategy strategy : SequenceBatching.Strategy.values()) {
            interleaved(strategy);
        }
    }

    private void interleaved(SequenceBatching.Strategy strategy) throws Exception {
        Accumulator acc = new Accumulator();
        String name = "acc_" + strategy.name().toLowerCase(java.util.Locale.ROOT);
        backend.on(name, acc);
        // 2 instances × 2 slots = 4 slots for 64 sequences
        host = hostBuilder().model(model(name, 2, 2, sequences(strategy).maxQueueDelayMicros(100).build())).loadModel(name).build();
        int sequences = 64;
        ExecutorService pool = Executors.newFixedThreadPool(sequences);
        try {
            CountDownLatch gate = new CountDownLatch(1);
            List<Future<String>> results = new ArrayList<>();
            for (int s = 0; s < sequences; s++) {
                long corr = 1000 + s;
                results.add(pool.submit(() -> {
                    gate.await();
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    for (int round = 0; round < 2; round++) {
                        int length = 1 + rnd.nextInt(6);
                        long expected = 0;
                        for (int i = 0; i < length; i++) {
                            long in = rnd.nextLong(1, 1_000_000);
                            expected = step(i == 0 ? 0 : expected, in);
                            long got = out(host.infer(req(name, corr, in, i == 0, i == length - 1)));
                            if (got != expected) {
                                return "sequence " + corr + " step " + i + ": got " + got + ", expected " + expected;
                            }
                        }
                    }
                    return "";
                }));
            }
            gate.countDown();
            for (Future<String> f : results) {
                assertEquals("", f.get(60, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        assertTrue(acc.violations.isEmpty(), acc.violations.toString());
        assertTrue(acc.maxBatch.get() <= 2, "batch over 2: " + acc.maxBatch);
        assertEquals(0, host.sequenceSlotsInUse());
        assertEquals(0, host.openRequests());
        host.close();
        host = null;
    }

    @Test
    void randomIdleReleases_andAnUnloadRacingThem_leaveNoSlotAndNoRequest() throws Exception {
        Accumulator acc = new Accumulator();
        backend.on("acc", acc);
        BatchFixture.FakeTicker clock = new BatchFixture.FakeTicker();
        SequenceBatching sb = sequences(SequenceBatching.Strategy.OLDEST).maxSequenceIdleMicros(5_000).build();
        host = hostBuilder().ticker(clock).model(model("acc", 2, 2, sb)).loadModel("acc").build();
        int sequences = 32;
        ExecutorService pool = Executors.newFixedThreadPool(sequences + 1);
        AtomicInteger idleErrors = new AtomicInteger();
        AtomicInteger answered = new AtomicInteger();
        try {
            CountDownLatch gate = new CountDownLatch(1);
            List<Future<String>> results = new ArrayList<>();
            for (int s = 0; s < sequences; s++) {
                long corr = 1 + s;
                results.add(pool.submit(() -> {
                    gate.await();
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    long expected = 0;
                    boolean started = false;
                    for (int i = 0; i < 40; i++) {
                        long in = rnd.nextLong(1, 1000);
                        boolean start = !started;
                        CompletableFuture<InferenceResponse> f = host.infer(req("acc", corr, in, start, false));
                        try {
                            long got = f.get(30, TimeUnit.SECONDS).output("OUT").toLongArray()[0];
                            answered.incrementAndGet();
                            expected = step(start ? 0 : expected, in);
                            started = true;
                            if (got != expected) {
                                return "sequence " + corr + ": got " + got + ", expected " + expected;
                            }
                        } catch (ExecutionException e) {
                            String m = String.valueOf(e.getCause().getMessage());
                            if (m.contains("was idle")) {
                                idleErrors.incrementAndGet();
                                started = false; // released: start again
                            } else if (m.contains("unload") || m.contains("not loaded") || m.contains("unknown model") || m.contains("is unknown")
                                    || m.contains("no version") || m.contains("not ready") || m.contains("still queued")) {
                                return ""; // the unload won the race: every later request is refused too
                            } else {
                                return "sequence " + corr + ": unexpected error " + m;
                            }
                        }
                        if (rnd.nextInt(8) == 0) {
                            clock.advance(Duration.ofMillis(3)); // random idle time: sequences that paused past 5 ms get released
                        }
                    }
                    return "";
                }));
            }
            gate.countDown();
            int unloadAfter = ThreadLocalRandom.current().nextInt(50, 400);
            Future<?> unload = pool.submit(() -> {
                // the unload races the traffic once a random number of requests have been answered
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (answered.get() < unloadAfter && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                host.unload("acc");
                return null;
            });
            for (Future<String> f : results) {
                assertEquals("", f.get(60, TimeUnit.SECONDS));
            }
            unload.get(30, TimeUnit.SECONDS);
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        assertTrue(acc.violations.isEmpty(), acc.violations.toString());
        assertEquals(0, host.sequenceSlotsInUse());
        assertEquals(0, host.openRequests());
    }
}
