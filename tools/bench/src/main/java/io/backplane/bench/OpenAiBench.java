package io.backplane.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.jspecify.annotations.Nullable;

/**
 * The generation mode: closed-loop streamed completions against an OpenAI-compatible server, as
 * AIPerf and genai-perf measure them. At concurrency {@code c}, {@code c} virtual clients each
 * send a streaming request, read it to {@code [DONE]}, and send the next, for the warm-up and
 * then the measured duration (or request count). A request is measured when it ends inside the
 * measured window; every figure of a level counts the same requests.
 *
 * <p>Per level: requests/s; time to first token (TTFT: from sending to the first chunk with
 * content); inter-token latency (ITL: the time between content chunks divided by the tokens of
 * the later one, one value per token; see {@link SseStream}); output tokens/s and per request;
 * end-to-end request latency; errors with the first error's message.
 */
public final class OpenAiBench {
    /** How long a level waits, after its window, for the streams still in flight to end. */
    private static final Duration DRAIN = Duration.ofMinutes(10);

    private OpenAiBench() {
    }

    /** Runs every concurrency level of {@code options} and returns the measurements. */
    public static GenerationResult run(OpenAiOptions options) throws Exception {
        try (OpenAiDriver driver = new OpenAiDriver(options)) {
            driver.probe();
            List<GenerationResult.Level> levels = new ArrayList<>();
            for (int c : options.concurrency()) {
                levels.add(level(driver, c, options.warmup(), options.duration(), options.requestCount()));
            }
            return new GenerationResult(options.targetName(), options.model(), options.maxTokens(), levels);
        }
    }

    private static final class Run {
        final Recorder latency = new Recorder(3);
        final Recorder ttft = new Recorder(3);
        final Recorder itl = new Recorder(3);
        final AtomicLong errors = new AtomicLong();
        final AtomicLong outputTokens = new AtomicLong();
        final AtomicLong contentChunks = new AtomicLong();
        final AtomicLong tokensFromUsage = new AtomicLong();
        final AtomicLong outputFromUsage = new AtomicLong();
        final AtomicReference<String> firstError = new AtomicReference<>("");
        volatile boolean measuring;
        volatile boolean running = true;
        final CountDownLatch stopped;
        final CountDownLatch measured;
        final OpenAiDriver driver;

        Run(OpenAiDriver driver, int concurrency, long requestCount) {
            this.driver = driver;
            this.stopped = new CountDownLatch(concurrency);
            this.measured = new CountDownLatch((int) Math.min(Integer.MAX_VALUE, Math.max(1, requestCount)));
        }

        /** A virtual client: the next request leaves from the thread that completed the last. */
        void loop() {
            while (running) {
                CompletableFuture<SseStream.Generation> f;
                long t0 = System.nanoTime();
                try {
                    f = driver.call();
                } catch (RuntimeException e) {
                    f = CompletableFuture.failedFuture(e);
                }
                if (f.isDone()) {
                    try {
                        record(t0, f.join(), null);
                    } catch (CompletionException | java.util.concurrent.CancellationException e) {
                        record(t0, null, e);
                    }
                    continue;
                }
                f.whenComplete((g, e) -> {
                    record(t0, g, e);
                    loop();
                });
                return;
            }
            stopped.countDown();
        }

        void record(long t0, SseStream.@Nullable Generation g, @Nullable Throwable e) {
            long end = System.nanoTime();
            if (!measuring) {
                return;
            }
            measured.countDown();
            if (e != null || g == null) {
                errors.incrementAndGet();
                Throwable c = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                firstError.compareAndSet("", c == null ? "no answer" : Bench.describe(c));
                return;
            }
            latency.recordValue(Math.max(1, end - t0));
            if (g.ttftNanos() >= 0) {
                ttft.recordValue(Math.max(1, g.ttftNanos()));
            }
            g.interTokenLatencies((nanos, tokens) -> itl.recordValueWithCount(Math.max(1, nanos), tokens));
            outputTokens.addAndGet(g.outputTokens());
            contentChunks.addAndGet(g.contentChunks());
            if (g.tokensFromUsage()) {
                tokensFromUsage.incrementAndGet();
            }
            if (g.outputFromUsage()) {
                outputFromUsage.incrementAndGet();
            }
        }
    }

    private static GenerationResult.Level level(OpenAiDriver driver, int concurrency, Duration warmup, Duration duration, long requestCount)
            throws InterruptedException {
        Run run = new Run(driver, concurrency, requestCount);
        for (int i = 0; i < concurrency; i++) {
            run.loop();
        }
        Thread.sleep(warmup.toMillis());
        run.latency.reset();
        run.ttft.reset();
        run.itl.reset();
        run.measuring = true;
        long start = System.nanoTime();
        if (requestCount > 0) {
            run.measured.await(duration.toMillis(), TimeUnit.MILLISECONDS); // N requests, or the duration as a limit
        } else {
            Thread.sleep(duration.toMillis());
        }
        run.measuring = false;
        double seconds = (System.nanoTime() - start) / 1e9;
        run.running = false;
        if (!run.stopped.await(DRAIN.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("streams still open " + DRAIN.toMinutes() + " min after the level at concurrency " + concurrency
                    + " ended; is the server stalled? Lower --max-tokens or --concurrency.");
        }
        // every client has stopped: a request that ended in the window is in all the figures, or in none
        Histogram lat = run.latency.getIntervalHistogram();
        Histogram first = run.ttft.getIntervalHistogram();
        Histogram between = run.itl.getIntervalHistogram();
        long ok = lat.getTotalCount();
        long tokens = run.outputTokens.get();
        return new GenerationResult.Level(concurrency, ok, run.errors.get(), seconds, ok / seconds, millis(first, 50), millis(first, 99),
                millis(between, 50), millis(between, 99), source(run.tokensFromUsage.get(), ok), tokens / seconds, tokens,
                ok == 0 ? Double.NaN : (double) tokens / ok, source(run.outputFromUsage.get(), ok), run.contentChunks.get(), millis(lat, 50),
                millis(lat, 99), run.firstError.get());
    }

    private static GenerationResult.Source source(long fromUsage, long requests) {
        if (requests == 0) {
            return GenerationResult.Source.none;
        }
        return fromUsage == requests ? GenerationResult.Source.usage : fromUsage == 0 ? GenerationResult.Source.chunks : GenerationResult.Source.mixed;
    }

    private static double millis(Histogram h, double percentile) {
        return h.getTotalCount() == 0 ? Double.NaN : h.getValueAtPercentile(percentile) / 1e6;
    }
}
