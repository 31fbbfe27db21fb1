package io.backplane.plugin.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.TensorConfig;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every failing request is counted under Triton's reason label ({@code nv_inference_request_failure}
 * and {@code backplane_inference_failure_total}): REJECTED for a full queue, CANCELED for a request
 * cancelled while queued, BACKEND for a model whose execute raised and for an instance that failed.
 */
@Timeout(60)
class FailureReasonTest {
    private static InferenceRequest request(String model) {
        return InferenceRequest.builder(model).input(Tensor.ofFloats("IN0", new long[] {1, 1}, 1f)).build();
    }

    private static double sample(String text, String name, String... labels) {
        return MetricsFrontendTest.sample(text, name, labels);
    }

    /** Scrapes until {@code name{labels}} reads {@code expected} or 10 s pass; returns the last scrape. */
    private static String awaitSample(MetricsFrontend metrics, double expected, String name, String... labels) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        String text = metrics.scrape();
        while (sample(text, name, labels) != expected && System.nanoTime() < deadline) {
            Thread.sleep(20);
            text = metrics.scrape();
        }
        return text;
    }

    @Test
    void failures_queueFullCancelledBackendInstanceFailure_eachUnderTritonsReason() throws Exception {
        PendingCountTest.HeldBackend gate = new PendingCountTest.HeldBackend();
        ModelConfig gated = ModelConfig.builder("gated").backend("held").maxBatchSize(4)
                .input(TensorConfig.of("IN0", DataType.FP32, 1)).output(TensorConfig.of("OUT0", DataType.FP32, 1))
                .dynamicBatching(DynamicBatching.builder().defaultQueuePolicy(QueuePolicy.builder().maxQueueSize(1).build()).build()).build();
        try (BackplaneHost host = BackplaneHost.builder().backend(gate).backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50)).unloadTimeout(Duration.ofSeconds(5))
                .model(gated).model(TestBackend.failing("fail")).model(TestBackend.crashing("crash"))
                .loadModel("gated").loadModel("fail").loadModel("crash").build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        java.util.Map.of("host", "127.0.0.1", "port", "0")))) {
            metrics.start();
            // As Triton's: a loaded version's failure counters are there at 0 before any request, in Triton's label order,
            // which clients matching the text rely on (Triton's lifecycle_test reads the value before its first request).
            String before = metrics.scrape();
            for (String reason : List.of("REJECTED", "CANCELED", "BACKEND", "OTHER")) {
                assertTrue(before.contains("nv_inference_request_failure{model=\"fail\",reason=\"" + reason + "\",version=\"1\"} 0\n"), before);
            }
            assertTrue(before.contains("nv_inference_request_success{model=\"fail\",version=\"1\"} 0\n"), before);
            CompletableFuture<InferenceResponse> running = host.infer(request("gated"));
            assertTrue(gate.entered.tryAcquire(30, TimeUnit.SECONDS), "the first request reaches the instance");
            CompletableFuture<InferenceResponse> queued = host.infer(request("gated"));
            ExecutionException full = assertThrows(ExecutionException.class, () -> host.infer(request("gated")).get(10, TimeUnit.SECONDS));
            assertEquals(ErrorCode.RESOURCE_EXHAUSTED, assertInstanceOf(BackplaneException.class, full.getCause()).code(), full.getCause().getMessage());
            queued.cancel(true);
            assertThrows(Exception.class, () -> queued.get(10, TimeUnit.SECONDS), "cancelled while queued: it ends at once");
            gate.gate.release(1_000_000);
            running.get(30, TimeUnit.SECONDS);

            assertThrows(ExecutionException.class, () -> host.infer(MetricsFrontendTest.fp32("fail")).get(10, TimeUnit.SECONDS));
            assertThrows(ExecutionException.class, () -> host.infer(MetricsFrontendTest.fp32("crash")).get(10, TimeUnit.SECONDS));

            String text = awaitSample(metrics, 1.0, "nv_inference_request_failure", "model=\"gated\"", "reason=\"CANCELED\"", "version=\"1\"");
            assertEquals(1.0, sample(text, "nv_inference_request_failure", "model=\"gated\"", "reason=\"REJECTED\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "nv_inference_request_failure", "model=\"gated\"", "reason=\"CANCELED\"", "version=\"1\""), text);
            assertEquals(0.0, sample(text, "nv_inference_request_failure", "model=\"gated\"", "reason=\"BACKEND\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "nv_inference_request_success", "model=\"gated\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "backplane_inference_failure_total", "model=\"gated\"", "reason=\"rejected\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "backplane_inference_failure_total", "model=\"gated\"", "reason=\"canceled\"", "version=\"1\""), text);
            text = awaitSample(metrics, 1.0, "nv_inference_request_failure", "model=\"crash\"", "reason=\"BACKEND\"", "version=\"1\"");
            assertEquals(1.0, sample(text, "nv_inference_request_failure", "model=\"fail\"", "reason=\"BACKEND\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "nv_inference_request_failure", "model=\"crash\"", "reason=\"BACKEND\"", "version=\"1\""), text);
            assertEquals(0.0, sample(text, "nv_inference_request_failure", "model=\"crash\"", "reason=\"OTHER\"", "version=\"1\""), text);
        }
        TestSupport.assertNoBackplaneThreads();
    }
}
