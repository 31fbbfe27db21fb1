package io.backplane.plugin.metrics;

import static io.backplane.plugin.metrics.MetricsFrontendTest.sample;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.ResponseObserver;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The generation families: time to first token, inter-token latency (per token) and output tokens, per model and version. */
class GenerationMetricsTest {
    private static final String TTFT = "backplane_time_to_first_token_seconds";
    private static final String ITL = "backplane_inter_token_latency_seconds";
    private static final String TOKENS = "backplane_output_tokens_total";

    @Test
    void host_decoupledAndPlainResponses_inTheScrape() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(TestBackend.identity("identity", DataType.FP32)).model(TestBackend.repeat("repeat")).loadModel("identity")
                .loadModel("repeat").build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0")))) {
            metrics.start();
            String before = metrics.scrape();
            assertEquals(0.0, sample(before, TTFT + "_count", "model=\"repeat\"", "version=\"1\""), "series exist at load: " + before);
            assertEquals(0.0, sample(before, TOKENS, "model=\"repeat\"", "version=\"1\""), before);

            for (int i = 0; i < 2; i++) {
                CompletableFuture<Void> done = new CompletableFuture<>();
                host.stream(InferenceRequest.builder("repeat").input(Tensor.ofLongs("IN", new long[] {1}, 3)).build(), new ResponseObserver() {
                    @Override
                    public void onResponse(InferenceResponse response) {
                    }

                    @Override
                    public void onComplete() {
                        done.complete(null);
                    }

                    @Override
                    public void onError(BackplaneException error) {
                        done.completeExceptionally(error);
                    }
                });
                done.get(20, TimeUnit.SECONDS);
            }
            host.infer(MetricsFrontendTest.fp32("identity")).get(20, TimeUnit.SECONDS);

            String text = metrics.scrape();
            assertTrue(text.contains("# TYPE " + TTFT + " histogram\n"), text);
            assertTrue(text.contains("# TYPE " + ITL + " histogram\n"), text);
            assertTrue(text.contains("# TYPE " + TOKENS + " counter\n"), text);
            assertTrue(text.contains(TTFT + "_bucket{"), "histogram buckets are published");
            assertEquals(2.0, sample(text, TTFT + "_count", "model=\"repeat\"", "version=\"1\""), text);
            assertTrue(sample(text, TTFT + "_sum", "model=\"repeat\"", "version=\"1\"") > 0, text);
            assertEquals(4.0, sample(text, ITL + "_count", "model=\"repeat\"", "version=\"1\""), text);
            assertTrue(sample(text, ITL + "_sum", "model=\"repeat\"", "version=\"1\"") >= 0, text);
            assertEquals(6.0, sample(text, TOKENS, "model=\"repeat\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, TTFT + "_count", "model=\"identity\"", "version=\"1\""), text);
            assertEquals(0.0, sample(text, ITL + "_count", "model=\"identity\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, TOKENS, "model=\"identity\"", "version=\"1\""), text);
        }
        TestSupport.assertNoBackplaneThreads();
    }

    /** A response of k tokens records k inter-token samples of its delay / k; a first response's tokens count, without samples. */
    @Test
    void listener_multiTokenResponses_samplePerToken() {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        MetricsListener l = new MetricsListener(registry, true, null);
        l.versionLoaded("llm", 2);
        l.responseSent("llm", 2, true, 2_000_000, 4);
        l.responseSent("llm", 2, false, 3_000_000, 3);
        l.responseSent("llm", 2, false, 1_000_000, 1);
        String text = registry.scrape();
        assertEquals(1.0, sample(text, TTFT + "_count", "model=\"llm\"", "version=\"2\""), text);
        assertEquals(0.002, sample(text, TTFT + "_sum", "model=\"llm\"", "version=\"2\""), 1e-9, text);
        assertEquals(4.0, sample(text, ITL + "_count", "model=\"llm\"", "version=\"2\""), text);
        assertEquals(0.004, sample(text, ITL + "_sum", "model=\"llm\"", "version=\"2\""), 1e-9, text);
        assertEquals(8.0, sample(text, TOKENS, "model=\"llm\"", "version=\"2\""), text);
        l.responseSent("llm", 2, false, 1_000_000_000, 1L << 40); // an absurd count: bounded samples, all tokens counted
        text = registry.scrape();
        assertEquals(4.0 + MetricsListener.MAX_TOKEN_SAMPLES, sample(text, ITL + "_count", "model=\"llm\"", "version=\"2\""), text);
        assertEquals(8.0 + (1L << 40), sample(text, TOKENS, "model=\"llm\"", "version=\"2\""), text);
        registry.close();
    }
}
