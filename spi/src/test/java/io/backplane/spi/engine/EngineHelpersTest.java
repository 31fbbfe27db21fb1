package io.backplane.spi.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

class EngineHelpersTest {
    private static final ModelConfig BATCHING = ModelConfig.builder("adder").backend("test").maxBatchSize(8)
            .input(TensorConfig.of("X", DataType.FP32, 2)).input(TensorConfig.builder("BIAS", DataType.FP32).dims(1).optional(true).build())
            .output(TensorConfig.of("Y", DataType.FP32, 2)).output(TensorConfig.of("N", DataType.INT64, 1)).build();
    private static final ModelConfig PLAIN = BATCHING.toBuilder().maxBatchSize(0).build();

    /** A request as the core hands it over: its sender records the one answer. */
    static final class Req implements ScheduledRequest {
        private static final AtomicInteger IDS = new AtomicInteger();
        final long id = IDS.incrementAndGet();
        final InferenceRequest request;
        final AtomicReference<@Nullable InferenceResponse> answer = new AtomicReference<>();
        final AtomicInteger sends = new AtomicInteger();
        volatile boolean cancelled;
        final ResponseSender sender = new ResponseSender() {
            @Override
            public void send(@Nullable InferenceResponse response, int flags) {
                sends.incrementAndGet();
                assertEquals(FINAL, flags);
                if (!answer.compareAndSet(null, response)) {
                    throw new IllegalStateException("request " + id + " answered twice");
                }
            }

            @Override
            public boolean isClosed() {
                return answer.get() != null;
            }
        };

        Req(InferenceRequest request) {
            this.request = request;
        }

        @Override
        public long id() {
            return id;
        }

        @Override
        public InferenceRequest request() {
            return request;
        }

        @Override
        public ResponseSender sender() {
            return sender;
        }

        @Override
        public boolean isCancelled() {
            return cancelled;
        }

        @Override
        public int batchSize() {
            return 1;
        }

        @Override
        public int priorityLevel() {
            return 1;
        }

        @Override
        public long arrivalNanos() {
            return 0;
        }

        InferenceResponse answer() {
            InferenceResponse r = answer.get();
            assertNotNull(r, "request " + id + " was not answered");
            return r;
        }
    }

    private static Req rows(float... values) {
        return new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {values.length / 2, 2}, values)).build());
    }

    /** The engine the tests batch for: Y = X + 1 (or + BIAS), N = the row's index in the whole batch. */
    private static Map<String, Tensor> addOne(RowBatch b) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment x = b.stack("X", arena);
            float bias = b.has("BIAS") ? b.input(0, "BIAS").toFloatArray()[0] : 1f;
            long[] shape = b.shape("X");
            float[] y = new float[Math.toIntExact(shape[0] * shape[1])];
            long[] n = new long[b.rows()];
            for (int i = 0; i < y.length; i++) {
                y[i] = x.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i) + bias;
            }
            for (int r = 0; r < n.length; r++) {
                n[r] = r;
            }
            Map<String, Tensor> out = new HashMap<>();
            out.put("Y", Tensor.ofFloats("Y", shape, y));
            out.put("N", Tensor.ofLongs("N", new long[] {b.rows(), 1}, n));
            return out;
        }
    }

    @Test
    void rowsOfSeveralRequests_runAsOneCall_andEachGetsItsOwnRows() {
        Req a = rows(1, 2);
        Req b = rows(3, 4, 5, 6);
        Req c = rows(7, 8);
        List<Integer> calls = new ArrayList<>();
        BatchLayout.of(BATCHING).execute(List.of(a, b, c), g -> {
            calls.add(g.rows());
            return addOne(g);
        });
        assertEquals(List.of(4), calls, "one engine call for 4 rows");
        assertArrayEquals(new float[] {2, 3}, a.answer().outputs().get(0).toFloatArray());
        assertArrayEquals(new float[] {4, 5, 6, 7}, b.answer().outputs().get(0).toFloatArray());
        assertArrayEquals(new long[] {2, 2}, b.answer().outputs().get(0).shape());
        assertArrayEquals(new long[] {3}, c.answer().outputs().get(1).toLongArray(), "c's rows come after a's and b's");
        assertEquals(1, a.sends.get());
    }

    @Test
    void oneRequestInNativeMemory_isStackedWithoutACopy_andHeapMemoryIsCopiedToNative() {
        try (Arena shared = Arena.ofShared()) {
            MemorySegment nativeRows = shared.allocate(8, 64);
            nativeRows.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 0, 1f);
            nativeRows.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 1, 2f);
            Req inPlace = new Req(InferenceRequest.builder("adder").input(Tensor.of("X", DataType.FP32, new long[] {1, 2}, nativeRows)).build());
            Req onHeap = rows(1, 2);
            for (Req r : List.of(inPlace, onHeap)) {
                BatchLayout.of(BATCHING).execute(List.of(r), g -> {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment x = g.stack("X", arena);
                        assertTrue(x.isNative(), "an engine gets native memory");
                        assertEquals(0, x.address() % 4, "aligned to the element size");
                        if (r == inPlace) {
                            assertSame(nativeRows, x, "a lone request's native memory is handed over as it is");
                        } else {
                            assertEquals(2f, x.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, 1));
                        }
                    }
                    return addOne(g);
                });
                assertFalse(r.answer().isError(), String.valueOf(r.answer().error()));
            }
        }
    }

    @Test
    void refusedRequests_endWithTheirOwnError_andTheRestRun() {
        Req good = rows(1, 2);
        Req wrongWidth = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {1, 3}, 1, 2, 3)).build());
        Req wrongType = new Req(InferenceRequest.builder("adder").input(Tensor.ofInts("X", new long[] {1, 2}, 1, 2)).build());
        Req unknown = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {1, 2}, 1, 2))
                .input(Tensor.ofFloats("Z", new long[] {1, 1}, 1)).build());
        Req tooMany = rows(new float[18]);
        Req badOutput = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {1, 2}, 1, 2)).requestOutput("Q").build());
        Req cancelled = rows(1, 2);
        cancelled.cancelled = true;
        BatchLayout.of(BATCHING).execute(List.of(good, wrongWidth, wrongType, unknown, tooMany, badOutput, cancelled), EngineHelpersTest::addOne);
        assertFalse(good.answer().isError());
        assertError(wrongWidth, ErrorCode.INVALID_ARGUMENT, "[1, 3]");
        assertError(wrongType, ErrorCode.INVALID_ARGUMENT, "INT32");
        assertError(unknown, ErrorCode.INVALID_ARGUMENT, "'Z'");
        assertError(tooMany, ErrorCode.INVALID_ARGUMENT, "max_batch_size 8");
        assertError(badOutput, ErrorCode.INVALID_ARGUMENT, "'Q'");
        assertError(cancelled, ErrorCode.CANCELLED, "cancelled");
    }

    @Test
    void requestedOutputs_onlyThoseAreSent() {
        Req onlyN = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {1, 2}, 1, 2)).requestOutput("N").build());
        Req all = rows(5, 6);
        BatchLayout.of(BATCHING).execute(List.of(onlyN, all), EngineHelpersTest::addOne);
        assertEquals(List.of("N"), onlyN.answer().outputs().stream().map(Tensor::name).toList());
        assertEquals(List.of("Y", "N"), all.answer().outputs().stream().map(Tensor::name).toList());
    }

    @Test
    void differentShapesOrOptionalInputs_runInSeparateGroups() {
        ModelConfig variable = BATCHING.toBuilder().inputs(List.of(TensorConfig.of("X", DataType.FP32, -1),
                TensorConfig.builder("BIAS", DataType.FP32).dims(1).optional(true).build())).outputs(List.of(TensorConfig.of("Y", DataType.FP32, -1),
                        TensorConfig.of("N", DataType.INT64, 1))).build();
        Req two = rows(1, 2);
        Req three = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {1, 3}, 1, 2, 3)).build());
        Req biased = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {1, 2}, 1, 2))
                .input(Tensor.ofFloats("BIAS", new long[] {1, 1}, 10)).build());
        List<RowBatch> groups = BatchLayout.of(variable).group(List.of(two, three, biased));
        assertEquals(3, groups.size(), "widths 2 and 3, and the biased request, cannot share a call");
        BatchLayout.of(variable).execute(List.of(two, three, biased), EngineHelpersTest::addOne);
        assertFalse(biased.answer().isError(), String.valueOf(biased.answer().error()));
        assertArrayEquals(new float[] {11, 12}, biased.answer().outputs().get(0).toFloatArray());
        assertArrayEquals(new float[] {2, 3, 4}, three.answer().outputs().get(0).toFloatArray());
    }

    @Test
    void withoutBatching_eachRequestRunsAlone_withItsOwnShape() {
        Req a = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {2}, 1, 2)).build());
        Req b = new Req(InferenceRequest.builder("adder").input(Tensor.ofFloats("X", new long[] {2}, 3, 4)).build());
        AtomicInteger calls = new AtomicInteger();
        BatchLayout.of(PLAIN).execute(List.of(a, b), g -> {
            calls.incrementAndGet();
            assertArrayEquals(new long[] {2}, g.shape("X"));
            float[] x = g.input(0, "X").toFloatArray();
            return Map.of("Y", Tensor.ofFloats("Y", new long[] {2}, x[0] * 2, x[1] * 2), "N", Tensor.ofLongs("N", new long[] {1}, 0));
        });
        assertEquals(2, calls.get());
        assertArrayEquals(new float[] {6, 8}, b.answer().outputs().get(0).toFloatArray());
    }

    @Test
    void anEngineFailingTheBatch_isRetriedPerRequest_soOnlyTheBadRequestFails() {
        Req a = rows(1, 2);
        Req poison = rows(-1, 2);
        Req c = rows(3, 4);
        List<Integer> calls = new ArrayList<>();
        BatchLayout.of(BATCHING).execute(List.of(a, poison, c), g -> {
            calls.add(g.size());
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment x = g.stack("X", arena);
                for (int i = 0; i < g.rows() * 2; i++) {
                    if (x.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i) < 0) {
                        throw new IllegalStateException("negative input");
                    }
                }
            }
            return addOne(g);
        });
        assertEquals(List.of(3, 1, 1, 1), calls);
        assertFalse(a.answer().isError());
        assertFalse(c.answer().isError());
        assertError(poison, ErrorCode.INTERNAL, "negative input");
    }

    @Test
    void aBackplaneExceptionFromTheEngine_keepsItsCode() {
        Req a = rows(1, 2);
        BatchLayout.of(BATCHING).execute(List.of(a), g -> {
            throw BackplaneException.invalid("feature 3 is NaN");
        });
        assertError(a, ErrorCode.INVALID_ARGUMENT, "feature 3 is NaN");
    }

    @Test
    void engineOutputsThatBreakTheContract_failTheRequests_naming_theOutput() {
        Req a = rows(1, 2);
        Req b = rows(3, 4);
        BatchLayout.of(BATCHING).execute(List.of(a, b), g -> Map.of("Y", Tensor.ofFloats("Y", new long[] {g.rows() + 1, 2}, new float[2 * g.rows() + 2]),
                "N", Tensor.ofLongs("N", new long[] {g.rows() + 1, 1}, new long[g.rows() + 1])));
        assertError(a, ErrorCode.INTERNAL, "rows");
        assertError(b, ErrorCode.INTERNAL, "output 'Y'");
        Req c = rows(1, 2);
        BatchLayout.of(BATCHING).execute(List.of(c), g -> Map.of("Y", Tensor.ofFloats("Y", new long[] {1, 2}, 0, 0)));
        assertError(c, ErrorCode.INTERNAL, "no output 'N'");
    }

    @Test
    void bytesInputsAndOutputs_stackAndSplitByElement() {
        ModelConfig text = ModelConfig.builder("upper").backend("test").maxBatchSize(4).input(TensorConfig.of("S", DataType.BYTES, 1))
                .output(TensorConfig.of("U", DataType.BYTES, 1)).build();
        Req a = new Req(InferenceRequest.builder("upper").input(Tensor.ofStrings("S", new long[] {2, 1}, "ab", "cd")).build());
        Req b = new Req(InferenceRequest.builder("upper").input(Tensor.ofStrings("S", new long[] {1, 1}, "ef")).build());
        BatchLayout.of(text).execute(List.of(a, b), g -> {
            List<String> up = g.stackBytes("S").stream().map(x -> new String(x, java.nio.charset.StandardCharsets.UTF_8).toUpperCase(java.util.Locale.ROOT))
                    .toList();
            return Map.of("U", Tensor.ofStrings("U", new long[] {g.rows(), 1}, up.toArray(String[]::new)));
        });
        assertEquals(List.of("AB", "CD"), a.answer().outputs().get(0).toStringList());
        assertEquals(List.of("EF"), b.answer().outputs().get(0).toStringList());
    }

    @Test
    void endedRequests_areSkipped_andNeverAnsweredTwice() {
        Req done = rows(1, 2);
        done.sender.send(InferenceResponse.error(BackplaneException.unavailable("unloaded")), ResponseSender.FINAL);
        Req a = rows(1, 2);
        BatchLayout.of(BATCHING).execute(List.of(done, a), g -> {
            assertEquals(1, g.size());
            return addOne(g);
        });
        assertEquals(1, done.sends.get());
        assertFalse(a.answer().isError());
    }

    @Test
    void modelDims_isTheReshapeWhenThereIsOne() {
        TensorConfig plain = TensorConfig.of("X", DataType.FP32, 4);
        TensorConfig reshaped = TensorConfig.builder("X", DataType.FP32).dims(4).reshape(List.of(2L, 2L)).build();
        assertNull(plain.reshape());
        assertEquals(List.of(4L), plain.modelDims());
        assertEquals(List.of(2L, 2L), reshaped.modelDims());
    }

    @Test
    void guard_releasesOnce_whenNoEntryIsOpen() {
        AtomicInteger released = new AtomicInteger();
        NativeGuard guard = new NativeGuard("model 'm' instance 0", released::incrementAndGet);
        try (NativeGuard.Entry _ = guard.enter()) {
            assertFalse(guard.isClosed());
        }
        guard.close();
        guard.close();
        assertEquals(1, released.get());
        assertTrue(guard.isReleased());
        BackplaneException late = assertThrows(BackplaneException.class, guard::enter);
        assertEquals(ErrorCode.UNAVAILABLE, late.code());
        assertTrue(late.getMessage().contains("model 'm' instance 0"), late.getMessage());
    }

    @Test
    void guard_closeDuringAnEntry_interrupts_andTheLastEntryReleases() throws Exception {
        AtomicInteger released = new AtomicInteger();
        AtomicInteger interrupted = new AtomicInteger();
        NativeGuard guard = new NativeGuard("m", released::incrementAndGet).onInterrupt(interrupted::incrementAndGet);
        NativeGuard.Entry first = guard.enter();
        NativeGuard.Entry second = guard.enter();
        guard.close();
        assertEquals(1, interrupted.get());
        assertEquals(0, released.get(), "never freed under a running entry");
        first.close();
        first.close(); // closing an entry again does nothing
        assertEquals(0, released.get());
        second.close();
        assertEquals(1, released.get());
        assertEquals(1, interrupted.get());
    }

    /** The interrupt holds the state like an entry: the last entry closing while it runs does not free the state under it. */
    @Test
    void guard_theInterruptNeverRunsOnFreedState() throws Exception {
        AtomicInteger released = new AtomicInteger();
        CountDownLatch interrupting = new CountDownLatch(1);
        CountDownLatch entryClosed = new CountDownLatch(1);
        AtomicInteger releasedDuringInterrupt = new AtomicInteger(-1);
        NativeGuard guard = new NativeGuard("m", released::incrementAndGet).onInterrupt(() -> {
            interrupting.countDown();
            try {
                assertTrue(entryClosed.await(30, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            releasedDuringInterrupt.set(released.get());
        });
        NativeGuard.Entry running = guard.enter();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            Future<?> closing = pool.submit(guard::close);
            assertTrue(interrupting.await(30, TimeUnit.SECONDS));
            running.close(); // the execute returns while close() is still interrupting
            entryClosed.countDown();
            closing.get(30, TimeUnit.SECONDS);
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
        assertEquals(0, releasedDuringInterrupt.get(), "the state was freed while the interrupt ran");
        assertEquals(1, released.get(), "released once the interrupt returned");
    }

    /** Many threads enter and leave while one closes at a random moment: the state is freed exactly once, after every entry that got in. */
    @Test
    void guard_underRacingEntriesAndClose_freesExactlyOnce_neverUnderAnEntry() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            for (int round = 0; round < 200; round++) {
                AtomicInteger inside = new AtomicInteger();
                AtomicInteger released = new AtomicInteger();
                AtomicInteger freedUnderEntry = new AtomicInteger();
                NativeGuard guard = new NativeGuard("m", () -> {
                    if (inside.get() != 0) {
                        freedUnderEntry.incrementAndGet();
                    }
                    released.incrementAndGet();
                }).onInterrupt(() -> {
                    if (released.get() != 0) {
                        freedUnderEntry.incrementAndGet(); // an interrupt on freed state
                    }
                });
                CountDownLatch start = new CountDownLatch(1);
                List<Future<?>> users = new ArrayList<>();
                for (int t = 0; t < 6; t++) {
                    users.add(pool.submit(() -> {
                        start.await();
                        for (int i = 0; i < 50; i++) {
                            try (NativeGuard.Entry _ = guard.enter()) {
                                inside.incrementAndGet();
                                if (ThreadLocalRandom.current().nextInt(4) == 0) {
                                    Thread.yield();
                                }
                                inside.decrementAndGet();
                            } catch (BackplaneException closed) {
                                return null;
                            }
                        }
                        return null;
                    }));
                }
                Future<?> closer = pool.submit(() -> {
                    start.await();
                    for (int i = ThreadLocalRandom.current().nextInt(100); i > 0; i--) {
                        Thread.onSpinWait();
                    }
                    guard.close();
                    return null;
                });
                start.countDown();
                for (Future<?> f : users) {
                    f.get(30, TimeUnit.SECONDS);
                }
                closer.get(30, TimeUnit.SECONDS);
                assertEquals(1, released.get(), "round " + round);
                assertEquals(0, freedUnderEntry.get(), "round " + round);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
    }

    private static void assertError(Req r, ErrorCode code, String mention) {
        InferenceResponse answer = r.answer();
        assertTrue(answer.isError(), "request " + r.id + " should have failed");
        BackplaneException e = answer.error();
        assertNotNull(e);
        assertEquals(code, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains(mention), "'" + e.getMessage() + "' should mention " + mention);
    }
}
