package io.backplane.core.lifecycle;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import io.backplane.spi.ResponseSender;
import io.backplane.spi.ScheduledRequest;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.host.HostListener;
import io.backplane.spi.host.ModelStatistics;
import io.backplane.spi.host.ResponseObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code HostListener.responseSent} and the generation statistics: one call per response that
 * carries output, the first flagged, tokens from {@code num_output_tokens} or 1; never for a bare
 * FINAL, an error or zero tokens; always before the request's end. No timing figure is asserted,
 * only counts, flags, order and signs.
 */
@Timeout(60)
class GenerationMetricsTest {
    /** A decoupled model: IN = k sends k responses (OUT = i), then a bare FINAL. */
    private static final String GEN = "gen";
    /** As {@link #GEN}, each response also carrying num_output_tokens = i + 1 (UINT32), the last one with FINAL. */
    private static final String GEN_TOKENS = "gen_tokens";
    private static final String PLAIN = "plain";

    private final ScriptedBackend backend = new ScriptedBackend();
    private final Recorder recorder = new Recorder();
    private final ExecutorService senders = Executors.newFixedThreadPool(4);
    private @Nullable BackplaneHost host;

    @AfterEach
    void closeAndCheckHygiene() throws InterruptedException {
        if (host != null) {
            host.close();
            assertEquals(0, host.openRequests(), "open requests after close");
        }
        senders.shutdownNow();
        assertTrue(senders.awaitTermination(10, TimeUnit.SECONDS), "test senders ended");
        Hygiene.assertNoBackplaneThreads();
    }

    /** Records each event in order; a response reported after its request's end counts as misordered. */
    private static final class Recorder implements HostListener {
        final ConcurrentLinkedQueue<String> events = new ConcurrentLinkedQueue<>();
        final AtomicInteger firsts = new AtomicInteger();
        final AtomicInteger laters = new AtomicInteger();
        final AtomicLong tokens = new AtomicLong();
        final AtomicLong laterTokens = new AtomicLong();
        final AtomicInteger negative = new AtomicInteger();
        final AtomicInteger ended = new AtomicInteger();

        @Override
        public void responseSent(String model, long version, boolean first, long nanos, long tokens) {
            events.add(model + (first ? " first " : " next ") + tokens);
            (first ? firsts : laters).incrementAndGet();
            this.tokens.addAndGet(tokens);
            if (!first) {
                laterTokens.addAndGet(tokens);
            }
            if (nanos < 0 || tokens < 1) {
                negative.incrementAndGet();
            }
        }

        @Override
        public void requestEnded(String model, long version, Outcome outcome, long queueNanos, long computeNanos) {
            events.add(model + " ended " + outcome);
            ended.incrementAndGet();
        }
    }

    private static ModelConfig decoupled(String name) {
        return ModelConfig.builder(name).backend(ScriptedBackend.NAME).decoupled(true).input(TensorConfig.of("IN", DataType.INT64, 1))
                .output(TensorConfig.of("OUT", DataType.INT64, 1)).output(TensorConfig.of("num_output_tokens", DataType.UINT32, 1)).build();
    }

    /** Sends k responses for each request from the test's sender threads (execute returns at once, as a streaming model does). */
    private ScriptedBackend.Script streaming(boolean withTokens) {
        return (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                long k = r.request().input("IN").toLongArray()[0];
                ResponseSender s = r.sender();
                senders.execute(() -> {
                    for (long i = 0; i < k; i++) {
                        List<Tensor> out = new ArrayList<>();
                        out.add(Tensor.ofLongs("OUT", new long[] {1}, i));
                        if (withTokens) {
                            out.add(Tensor.ofRaw("num_output_tokens", DataType.UINT32, new long[] {1}, le32(i + 1)));
                        }
                        s.send(InferenceResponse.of(out), withTokens && i == k - 1 ? ResponseSender.FINAL : 0);
                    }
                    if (!withTokens || k == 0) {
                        s.send(null, ResponseSender.FINAL);
                    }
                });
            }
        };
    }

    private static byte[] le32(long v) {
        return new byte[] {(byte) v, (byte) (v >>> 8), (byte) (v >>> 16), (byte) (v >>> 24)};
    }

    private BackplaneHost start() {
        backend.on(GEN, streaming(false)).on(GEN_TOKENS, streaming(true));
        host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT).unloadTimeout(Duration.ofSeconds(5))
                .listener(recorder).model(decoupled(GEN)).model(decoupled(GEN_TOKENS)).model(ScriptedBackend.model(PLAIN, false))
                .model(ScriptedBackend.model("failing", false)).model(decoupled("zero")).loadModel(GEN).loadModel(GEN_TOKENS).loadModel(PLAIN)
                .loadModel("failing").loadModel("zero").build();
        return host;
    }

    /** Streams one request and waits for its end; returns how many responses its observer saw. */
    private static int stream(BackplaneHost h, String model, long k) throws Exception {
        return stream(h, ScriptedBackend.request(model, k), new ConcurrentLinkedQueue<>());
    }

    private static int stream(BackplaneHost h, InferenceRequest request, ConcurrentLinkedQueue<InferenceResponse> got) throws Exception {
        CompletableFuture<Integer> done = new CompletableFuture<>();
        AtomicInteger seen = new AtomicInteger();
        h.stream(request, new ResponseObserver() {
            @Override
            public void onResponse(InferenceResponse response) {
                got.add(response);
                seen.incrementAndGet();
            }

            @Override
            public void onComplete() {
                done.complete(seen.get());
            }

            @Override
            public void onError(BackplaneException error) {
                done.completeExceptionally(error);
            }
        });
        return done.get(20, TimeUnit.SECONDS);
    }

    @Test
    void decoupled_kResponsesThenBareFinal_firstThenNextOneTokenEachThenEnded() throws Exception {
        BackplaneHost h = start();
        assertEquals(3, stream(h, GEN, 3));
        assertEquals(List.of("gen first 1", "gen next 1", "gen next 1", "gen ended SUCCESS"), List.copyOf(recorder.events));
        assertEquals(0, recorder.negative.get());
    }

    @Test
    void decoupled_numOutputTokens_countsItsValueAndTheFinalWithOutput() throws Exception {
        BackplaneHost h = start();
        assertEquals(3, stream(h, GEN_TOKENS, 3));
        assertEquals(List.of("gen_tokens first 1", "gen_tokens next 2", "gen_tokens next 3", "gen_tokens ended SUCCESS"),
                List.copyOf(recorder.events));
    }

    /** The client asked only for OUT: the backend's num_output_tokens still counts, and the client does not get it. */
    @Test
    void decoupled_numOutputTokensNotRequested_stillCounted() throws Exception {
        BackplaneHost h = start();
        ConcurrentLinkedQueue<InferenceResponse> got = new ConcurrentLinkedQueue<>();
        InferenceRequest onlyOut = InferenceRequest.builder(GEN_TOKENS).input(Tensor.ofLongs("IN", new long[] {1}, 2)).requestOutput("OUT").build();
        assertEquals(2, stream(h, onlyOut, got));
        assertEquals(List.of("gen_tokens first 1", "gen_tokens next 2", "gen_tokens ended SUCCESS"), List.copyOf(recorder.events));
        for (InferenceResponse r : got) {
            assertEquals(List.of("OUT"), r.outputs().stream().map(Tensor::name).toList());
        }
    }

    @Test
    void plain_oneResponse_isFirstWithOneToken() throws Exception {
        BackplaneHost h = start();
        h.infer(ScriptedBackend.request(PLAIN, 7)).get(20, TimeUnit.SECONDS);
        assertEquals(List.of("plain first 1", "plain ended SUCCESS"), List.copyOf(recorder.events));
        ModelStatistics.Generation g = h.statistics(PLAIN, 1).getFirst().generation();
        assertEquals(1, g.firstToken().count());
        assertEquals(new ModelStatistics.Duration(0, 0), g.interToken());
        assertEquals(1, g.outputTokens());
    }

    @Test
    void errorsBareFinalsAndZeroTokens_areNotReported() throws Exception {
        backend.on("failing", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                r.sender().sendFinal(InferenceResponse.error(new BackplaneException(ErrorCode.INTERNAL, "failing on purpose")));
            }
        });
        backend.on("zero", (batch, inst) -> {
            for (ScheduledRequest r : batch) {
                r.sender().send(InferenceResponse.of(List.of(Tensor.ofRaw("num_output_tokens", DataType.UINT32, new long[] {1}, le32(0)))), 0);
                r.sender().send(InferenceResponse.of(List.of()), 0);
                r.sender().send(null, ResponseSender.FINAL);
            }
        });
        BackplaneHost h = start();
        assertEquals(0, stream(h, GEN, 0));
        assertEquals(2, stream(h, "zero", 0));
        CompletableFuture<InferenceResponse> failed = h.infer(ScriptedBackend.request("failing", 1));
        assertTrue(failed.handle((r, t) -> t != null).get(20, TimeUnit.SECONDS), "the failing model failed");
        assertEquals(0, recorder.firsts.get() + recorder.laters.get(), recorder.events.toString());
        assertEquals(ModelStatistics.Generation.ZERO, h.statistics("zero", 1).getFirst().generation());
    }

    /**
     * Many client threads stream to both decoupled models at once, their responses sent from
     * several sender threads: every request reports exactly one first response, every other
     * response once, and the statistics add up to the same figures.
     */
    @Test
    void manyThreads_everyResponseReportedOnce_statisticsAgree() throws Exception {
        BackplaneHost h = start();
        int clients = 8;
        int perClient = 25;
        CountDownLatch gate = new CountDownLatch(1);
        AtomicLong expectedResponses = new AtomicLong();
        AtomicLong expectedTokens = new AtomicLong();
        AtomicLong expectedGenTokensRequests = new AtomicLong();
        List<CompletableFuture<Void>> runs = new ArrayList<>();
        try (ExecutorService pool = Executors.newFixedThreadPool(clients)) {
            for (int c = 0; c < clients; c++) {
                int client = c;
                runs.add(CompletableFuture.runAsync(() -> {
                    try {
                        gate.await();
                        for (int i = 0; i < perClient; i++) {
                            long k = 1 + (client + i) % 5;
                            String model = (client + i) % 2 == 0 ? GEN : GEN_TOKENS;
                            assertEquals(k, stream(h, model, k));
                            expectedResponses.addAndGet(k);
                            expectedTokens.addAndGet(model.equals(GEN) ? k : k * (k + 1) / 2);
                            if (model.equals(GEN_TOKENS)) {
                                expectedGenTokensRequests.incrementAndGet();
                            }
                        }
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                }, pool));
            }
            gate.countDown();
            CompletableFuture.allOf(runs.toArray(CompletableFuture[]::new)).get(50, TimeUnit.SECONDS);
        }
        int requests = clients * perClient;
        assertEquals(requests, recorder.firsts.get());
        assertEquals(expectedResponses.get() - requests, recorder.laters.get());
        assertEquals(expectedTokens.get(), recorder.tokens.get());
        assertEquals(requests, recorder.ended.get());
        assertEquals(0, recorder.negative.get());

        ModelStatistics.Generation gen = h.statistics(GEN, 1).getFirst().generation();
        ModelStatistics.Generation tok = h.statistics(GEN_TOKENS, 1).getFirst().generation();
        assertEquals(requests, gen.firstToken().count() + tok.firstToken().count());
        assertEquals(expectedGenTokensRequests.get(), tok.firstToken().count());
        assertEquals(expectedTokens.get(), gen.outputTokens() + tok.outputTokens());
        assertEquals(recorder.laterTokens.get(), gen.interToken().count() + tok.interToken().count());
        assertEquals(tok.outputTokens() - tok.firstToken().count(), tok.interToken().count(), "first responses carry 1 token each");
        assertTrue(gen.firstToken().nanos() > 0 && tok.firstToken().nanos() > 0, "time to first token is counted");
        assertTrue(gen.interToken().nanos() >= 0 && tok.interToken().nanos() >= 0);
    }
}
