package io.backplane.plugin.metrics;

import io.backplane.plugin.http.TestBackend;
import io.backplane.plugin.http.TestSupport;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.ModelControlMode;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.InferenceRequest;
import io.backplane.spi.Tensor;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/** The metrics plugin on a real host: counts, reasons, histograms and gauges in Prometheus text. */
class MetricsFrontendTest {
    static InferenceRequest fp32(String model) {
        return InferenceRequest.builder(model).input(Tensor.ofFloats("IN0", new long[] {1}, 1f)).build();
    }

    /** The value of the first sample of {@code name} whose labels contain every one of {@code labels}, or -1. */
    static double sample(String text, String name, String... labels) {
        for (String line : text.split("\n")) {
            if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) {
                continue;
            }
            boolean all = true;
            for (String l : labels) {
                all &= line.contains(l);
            }
            if (all) {
                return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return -1;
    }

    @Test
    void metrics_countSuccessFailureReasonsTimesAndGauges() throws Exception {
        TestBackend backend = new TestBackend();
        int port;
        try (BackplaneHost host = BackplaneHost.builder().backend(backend).modelControlMode(ModelControlMode.EXPLICIT)
                .restartBackoff(Duration.ofMillis(10), Duration.ofMillis(50))
                .model(TestBackend.identity("identity", DataType.FP32)).model(TestBackend.failing("fail"))
                .model(TestBackend.crashing("crash")).loadModel("identity").loadModel("fail").loadModel("crash").build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0")));
                HttpClient http = HttpClient.newHttpClient()) {
            metrics.start();
            port = metrics.port();
            for (int i = 0; i < 3; i++) {
                host.infer(fp32("identity")).get();
            }
            assertThrows(ExecutionException.class, () -> host.infer(fp32("fail")).get());
            assertThrows(ExecutionException.class, () -> host.infer(fp32("nope")).get());
            assertThrows(ExecutionException.class, () -> host.infer(fp32("crash")).get());
            assertThrows(ExecutionException.class, () -> host.infer(InferenceRequest.builder("identity")
                    .input(Tensor.ofInts("IN0", new long[] {1}, 1)).build()).get());

            URI uri = URI.create("http://127.0.0.1:" + port + "/metrics");
            String text = "";
            long deadline = System.nanoTime() + 10_000_000_000L;
            do {
                HttpResponse<String> r = http.send(HttpRequest.newBuilder(uri).GET().build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(200, r.statusCode());
                assertTrue(r.headers().firstValue("content-type").orElse("").startsWith("text/plain"));
                text = r.body();
                if (sample(text, "backplane_instance_restarts_total", "model=\"crash\"") >= 1) {
                    break;
                }
                Thread.sleep(50);
            } while (System.nanoTime() < deadline);

            assertEquals(3.0, sample(text, "backplane_inference_success_total", "model=\"identity\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "backplane_inference_failure_total", "model=\"fail\"", "reason=\"backend\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "backplane_inference_failure_total", "model=\"_unknown\"", "reason=\"rejected\""), text);
            assertEquals(1.0, sample(text, "backplane_inference_failure_total", "model=\"identity\"", "reason=\"rejected\"", "version=\"none\""), text);
            assertEquals(0.0, sample(text, "backplane_inference_failure_total", "model=\"identity\"", "reason=\"canceled\"", "version=\"1\""), text);
            assertEquals(3.0, sample(text, "backplane_inference_queue_duration_seconds_count", "model=\"identity\""), text);
            assertEquals(3.0, sample(text, "backplane_inference_compute_duration_seconds_count", "model=\"identity\""), text);
            assertTrue(text.contains("backplane_inference_compute_duration_seconds_bucket{"), "histogram buckets are published");
            assertEquals(0.0, sample(text, "backplane_inference_inflight_requests", "model=\"identity\""), text);
            assertTrue(sample(text, "backplane_instance_restarts_total", "model=\"crash\"") >= 1, text);
            assertEquals(1.0, sample(text, "backplane_server_live"), text);
            assertTrue(sample(text, "backplane_inference_batches_total", "model=\"identity\"") >= 3, text);

            assertEquals(3.0, sample(text, "nv_inference_request_success", "model=\"identity\"", "version=\"1\""), text);
            assertEquals(1.0, sample(text, "nv_inference_request_failure", "model=\"fail\"", "reason=\"BACKEND\"", "version=\"1\""), text);
            assertEquals(3.0, sample(text, "nv_inference_exec_count", "model=\"identity\"", "version=\"1\""), text);
            assertEquals(3.0, sample(text, "nv_inference_count", "model=\"identity\"", "version=\"1\""), text);
            assertTrue(sample(text, "nv_inference_request_duration_us", "model=\"identity\"", "version=\"1\"") >= 0, text);
            for (String n : List.of("nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                    "nv_inference_compute_output_duration_us")) {
                assertTrue(text.contains("# TYPE " + n + " counter\n"), n + " in " + text);
            }
            assertEquals(0.0, sample(text, "nv_inference_pending_request_count", "model=\"identity\"", "version=\"1\""), text);
            assertFalse(text.contains("nv_inference_request_success_total"), "Triton's counters carry no _total suffix");
            HttpResponse<String> missing = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/other")).GET().build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(404, missing.statusCode());
            assertTrue(missing.body().contains("\"error\""));
        }
        TestSupport.assertPortClosed(port);
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void modelLoadDuration_perLoadedVersion_keptOverReload_goneAfterUnload() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(TestBackend.identity("identity", DataType.FP32)).model(TestBackend.identity("later", DataType.FP32))
                .loadModel("identity").build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0")))) {
            metrics.start();
            String text = metrics.scrape();
            assertTrue(text.contains("# TYPE nv_model_load_duration_secs gauge\n"), text);
            // Loaded before the plugin started: the host replays its load time to the late listener.
            assertTrue(sample(text, "nv_model_load_duration_secs", "model=\"identity\"", "version=\"1\"") >= 0, text);
            assertEquals(1.0, sample(text, "backplane_model_instances", "model=\"identity\"", "version=\"1\""), text); // replayed too
            assertEquals(-1.0, sample(text, "nv_model_load_duration_secs", "model=\"later\""), text);
            host.load("later");
            assertTrue(sample(metrics.scrape(), "nv_model_load_duration_secs", "model=\"later\"", "version=\"1\"") >= 0);
            host.load("later"); // a reload loads the new copy beside the old, then unloads the old one
            assertTrue(sample(metrics.scrape(), "nv_model_load_duration_secs", "model=\"later\"", "version=\"1\"") >= 0);
            assertEquals(1.0, sample(metrics.scrape(), "backplane_model_instances", "model=\"later\"", "version=\"1\""), "the new copy's count");
            assertEquals(1.0, sample(metrics.scrape(), "backplane_model_instances", "model=\"later\"", "version=\"1\""));
            host.unload("later");
            text = metrics.scrape();
            assertEquals(0.0, sample(text, "backplane_model_instances", "model=\"later\"", "version=\"1\""), text);
            assertEquals(-1.0, sample(text, "nv_model_load_duration_secs", "model=\"later\""), text);
            assertTrue(sample(text, "nv_model_load_duration_secs", "model=\"identity\"", "version=\"1\"") >= 0, text);
        }
    }

    @Test
    void series_existAtLoad_andUnknownNamesNeverGrowTheScrape() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(TestBackend.identity("identity", DataType.FP32)).model(TestBackend.identity("later", DataType.FP32))
                .loadModel("identity").build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0")))) {
            metrics.start();
            String before = metrics.scrape();
            assertEquals(0.0, sample(before, "nv_inference_request_success", "model=\"identity\"", "version=\"1\""), before);
            assertEquals(0.0, sample(before, "backplane_inference_success_total", "model=\"identity\"", "version=\"1\""), before);
            assertEquals(-1.0, sample(before, "nv_inference_request_success", "model=\"later\""), before);
            host.load("later");
            assertEquals(0.0, sample(metrics.scrape(), "nv_inference_request_success", "model=\"later\"", "version=\"1\""));

            host.infer(fp32("nope-0")).handle((r, e) -> null).get();
            int lines = metrics.scrape().split("\n").length;
            for (int i = 1; i < 1100; i++) {
                host.infer(fp32("nope-" + i)).handle((r, e) -> null).get();
            }
            String after = metrics.scrape();
            assertEquals(lines, after.split("\n").length, "1,100 unknown names added series");
            assertEquals(1100.0, sample(after, "nv_inference_request_failure", "model=\"_unknown\"", "reason=\"REJECTED\""), after);
            assertEquals(1100.0, sample(after, "backplane_inference_failure_total", "model=\"_unknown\"", "reason=\"rejected\""), after);
            assertFalse(after.contains("nope-"), "no series names an unknown model");
        }
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void options_eitherFamilyOff_servesOnlyTheOther_bothOffRejected() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).modelControlMode(ModelControlMode.EXPLICIT)
                .model(TestBackend.identity("identity", DataType.FP32)).loadModel("identity").build()) {
            try (MetricsFrontend nvOnly = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                    Map.of("host", "127.0.0.1", "port", "0", "backplane_names", "false")))) {
                nvOnly.start();
                String text = nvOnly.scrape();
                assertTrue(text.contains("nv_inference_request_success{"), text);
                assertFalse(text.contains("backplane_"), text);
            }
            try (MetricsFrontend bpOnly = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                    Map.of("host", "127.0.0.1", "port", "0", "triton_names", "false")))) {
                bpOnly.start();
                String text = bpOnly.scrape();
                assertTrue(text.contains("backplane_inference_success_total{"), text);
                assertTrue(text.contains("\nbackplane_memory_held_bytes 0\n") && text.contains("\nbackplane_memory_refused_total 0\n"), text);
                assertFalse(text.contains("nv_"), text);
            }
            BackplaneException e = assertThrows(BackplaneException.class, () -> new MetricsFrontendFactory().create(TestSupport.context(host,
                    Map.of("backplane_names", "false", "triton_names", "false"))));
            assertTrue(e.getMessage().contains("triton_names=false"), e.getMessage());
            BackplaneException bad = assertThrows(BackplaneException.class, () -> new MetricsFrontendFactory().create(TestSupport.context(host,
                    Map.of("triton_names", "yes"))));
            assertTrue(bad.getMessage().contains("'yes'"), bad.getMessage());
        }
        TestSupport.assertNoBackplaneThreads();
    }

    @Test
    void options_unknownKey_rejected() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().backend(new TestBackend()).build()) {
            BackplaneException e = assertThrows(BackplaneException.class,
                    () -> new MetricsFrontendFactory().create(TestSupport.context(host, Map.of("path", "/x"))));
            assertTrue(e.getMessage().contains("path"));
        }
        TestSupport.assertNoBackplaneThreads();
    }

    /** A frontend's own family (FrontendContext.metrics(), here the gRPC frontend's name) is scraped beside the built-in series. */
    @Test
    void metrics_aFrontendsCustomFamily_onTheEndpoint() throws Exception {
        try (BackplaneHost host = BackplaneHost.builder().build();
                MetricsFrontend metrics = (MetricsFrontend) new MetricsFrontendFactory().create(TestSupport.context(host,
                        Map.of("host", "127.0.0.1", "port", "0")));
                HttpClient http = HttpClient.newHttpClient()) {
            metrics.start();
            var family = host.frontendMetrics("frontend 'grpc'").family("backplane_grpc_malformed_messages_total",
                    "gRPC messages that could not be parsed", io.backplane.spi.metrics.MetricKind.COUNTER);
            var counter = family.metric(Map.of("method", "ModelInfer"));
            counter.increment(2);
            String text = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + metrics.port() + "/metrics")).GET().build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            assertTrue(text.contains("# TYPE backplane_grpc_malformed_messages_total counter\n"), text);
            assertEquals(2, sample(text, "backplane_grpc_malformed_messages_total", "method=\"ModelInfer\""), text);
            counter.close();
            family.close();
        }
        TestSupport.assertNoBackplaneThreads();
    }
}
