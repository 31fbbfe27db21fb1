package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.core.BackplaneHost;
import io.backplane.core.testing.ScriptedBackend;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.RequestTrace;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The trace extension's OpenTelemetry tracer on a real host, its spans caught by an in-memory exporter. */
class OtelTracerTest {
    static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
    static final String PARENT = "00f067aa0ba902b7";

    @Test
    void tracedRequest_requestSpanUnderTheClientsTraceparent_withQueueAndComputeChildren() throws Exception {
        InMemorySpanExporter spans = InMemorySpanExporter.create();
        try (OtelTracer tracer = new OtelTracer(SimpleSpanProcessor.create(spans), Map.of("trace_level", List.of("TIMESTAMPS"), "trace_rate", List.of("1")));
                BackplaneHost host = BackplaneHost.builder().backend(new ScriptedBackend()).model(ScriptedBackend.model("m", false)).loadModel("m").build()) {
            RequestTrace t = tracer.start("m", "00-" + TRACE_ID + "-" + PARENT + "-01");
            host.infer(ScriptedBackend.request("m", 7).toBuilder().trace(t).build()).get(10, TimeUnit.SECONDS);
            t.finish(null);

            List<SpanData> got = spans.getFinishedSpanItems();
            assertEquals(List.of("COMPUTE", "InferRequest", "QUEUE"), got.stream().map(SpanData::getName).sorted().toList(), got.toString());
            SpanData request = got.stream().filter(s -> s.getName().equals("InferRequest")).findFirst().orElseThrow();
            assertEquals(TRACE_ID, request.getTraceId());
            assertEquals(PARENT, request.getParentSpanId(), "the request span continues the client's trace");
            assertEquals("m", request.getAttributes().asMap().entrySet().stream().filter(e -> e.getKey().getKey().equals("model_name"))
                    .findFirst().orElseThrow().getValue());
            for (SpanData s : got) {
                if (!s.getName().equals("InferRequest")) {
                    assertEquals(request.getSpanId(), s.getParentSpanId(), s.getName() + " is a child of the request span");
                    assertTrue(s.getStartEpochNanos() <= s.getEndEpochNanos(), s.toString());
                }
            }
            SpanData queue = got.stream().filter(s -> s.getName().equals("QUEUE")).findFirst().orElseThrow();
            SpanData compute = got.stream().filter(s -> s.getName().equals("COMPUTE")).findFirst().orElseThrow();
            assertEquals(queue.getEndEpochNanos(), compute.getStartEpochNanos(), "compute starts where the queue ends");

            // An error reaches the span's status.
            spans.reset();
            RequestTrace failed = tracer.start("m", null);
            failed.finish(new BackplaneException(ErrorCode.INTERNAL, "boom"));
            assertEquals(StatusCode.ERROR, spans.getFinishedSpanItems().getFirst().getStatus().getStatusCode());
        }
    }

    @Test
    void blsStep_childRequestSpanUnderItsParent_withItsOwnQueueAndCompute() throws Exception {
        InMemorySpanExporter spans = InMemorySpanExporter.create();
        // Model "p" answers each request with what its BLS step to "m" answered.
        ScriptedBackend backend = new ScriptedBackend().on("p", (batch, inst) -> {
            for (io.backplane.spi.ScheduledRequest r : batch) {
                java.util.concurrent.CompletableFuture<io.backplane.spi.InferenceResponse> answer = new java.util.concurrent.CompletableFuture<>();
                r.startChild(ScriptedBackend.request("m", ScriptedBackend.tagOf(ScriptedBackend.echo(r))), new io.backplane.spi.host.ResponseObserver() {
                    @Override
                    public void onResponse(io.backplane.spi.InferenceResponse response) {
                        answer.complete(io.backplane.spi.InferenceResponse.of(response.outputs()));
                    }

                    @Override
                    public void onComplete() {
                    }

                    @Override
                    public void onError(BackplaneException error) {
                        answer.completeExceptionally(error);
                    }
                });
                r.sender().sendFinal(answer.get(10, TimeUnit.SECONDS)); // a BLS step: the parent waits for its child
            }
        });
        try (OtelTracer tracer = new OtelTracer(SimpleSpanProcessor.create(spans), Map.of("trace_level", List.of("TIMESTAMPS"), "trace_rate", List.of("1")));
                BackplaneHost host = BackplaneHost.builder().backend(backend).model(ScriptedBackend.model("p", false)).model(ScriptedBackend.model("m", false))
                        .loadModel("p").loadModel("m").build()) {
            RequestTrace t = tracer.start("p", null);
            assertEquals(5, ScriptedBackend.tagOf(host.infer(ScriptedBackend.request("p", 5).toBuilder().trace(t).build()).get(10, TimeUnit.SECONDS)));
            t.finish(null);

            List<SpanData> got = spans.getFinishedSpanItems();
            List<SpanData> requests = got.stream().filter(s -> s.getName().equals("InferRequest")).toList();
            assertEquals(2, requests.size(), got.toString());
            SpanData parent = requests.stream().filter(s -> s.getParentSpanId().equals(io.opentelemetry.api.trace.SpanId.getInvalid())).findFirst()
                    .orElseThrow();
            SpanData child = requests.stream().filter(s -> s != parent).findFirst().orElseThrow();
            assertEquals(parent.getSpanId(), child.getParentSpanId(), "the BLS step is a child of its parent's request span");
            assertEquals(parent.getTraceId(), child.getTraceId());
            for (SpanData r : requests) {
                assertEquals(2, got.stream().filter(s -> s.getParentSpanId().equals(r.getSpanId()) && !s.getName().equals("InferRequest")).count(),
                        "QUEUE and COMPUTE under " + r);
            }
        }
    }

    @Test
    void settings_offByDefault_rateAndCountSample_perModelOverridesAndClears() {
        InMemorySpanExporter spans = InMemorySpanExporter.create();
        try (OtelTracer tracer = new OtelTracer(SimpleSpanProcessor.create(spans), Map.of())) {
            assertEquals(List.of("OFF"), tracer.settings("").get("trace_level"));
            assertSame(RequestTrace.NONE, tracer.start("m", null), "off by default");

            tracer.update("", Map.of("trace_level", List.of("TIMESTAMPS"), "trace_rate", List.of("2")));
            int traced = 0;
            for (int i = 0; i < 6; i++) {
                traced += tracer.start("m", null) == RequestTrace.NONE ? 0 : 1;
            }
            assertEquals(3, traced, "one request in 2");

            tracer.update("m", Map.of("trace_rate", List.of("1"), "trace_count", List.of("2")));
            assertEquals(List.of("1"), tracer.settings("m").get("trace_rate"));
            assertEquals(List.of("2"), tracer.settings("").get("trace_rate"), "the global setting is unchanged");
            traced = 0;
            for (int i = 0; i < 5; i++) {
                traced += tracer.start("m", null) == RequestTrace.NONE ? 0 : 1;
            }
            assertEquals(2, traced, "trace_count bounds the traces of the model");
            java.util.HashMap<String, List<String>> clear = new java.util.HashMap<>();
            clear.put("trace_rate", null);
            clear.put("trace_count", null);
            tracer.update("m", clear);
            assertEquals(List.of("2"), tracer.settings("m").get("trace_rate"), "cleared: the global setting applies again");

            BackplaneException bad = assertThrows(BackplaneException.class, () -> tracer.update("", Map.of("trace_rate", List.of("often"))));
            assertTrue(bad.getMessage().contains("trace_rate") && bad.getMessage().contains("often"), bad.getMessage());
            BackplaneException unknown = assertThrows(BackplaneException.class, () -> tracer.update("", Map.of("trace_colour", List.of("red"))));
            assertTrue(unknown.getMessage().contains("trace_colour"), unknown.getMessage());
            BackplaneException tensors = assertThrows(BackplaneException.class, () -> tracer.update("", Map.of("trace_level", List.of("TENSORS"))));
            assertEquals(ErrorCode.UNSUPPORTED, tensors.code());
            assertEquals(List.of("TIMESTAMPS"), tracer.settings("").get("trace_level"), "a refused update changes nothing");
        }
    }

    @Test
    void fromConfig_tritonSyntax_andBadValuesNamed() {
        try (OtelTracer tracer = OtelTracer.fromConfig(List.of("level=TIMESTAMPS", "rate=10", "mode=opentelemetry", "opentelemetry,exporter=logging"))) {
            Map<String, List<String>> s = tracer.settings("");
            assertEquals(List.of("TIMESTAMPS"), s.get("trace_level"));
            assertEquals(List.of("10"), s.get("trace_rate"));
        }
        BackplaneException e = assertThrows(BackplaneException.class, () -> OtelTracer.fromConfig(List.of("triton,file=/tmp/t.json")));
        assertTrue(e.getMessage().contains("triton"), e.getMessage());
        BackplaneException f = assertThrows(BackplaneException.class, () -> OtelTracer.fromConfig(List.of("opentelemetry,exporter=zipkin")));
        assertTrue(f.getMessage().contains("zipkin"), f.getMessage());
        try (OtelTracer defaults = OtelTracer.fromConfig(List.of())) {
            assertEquals(List.of("OFF"), defaults.settings("").get("trace_level"), "off by default");
            assertFalse(defaults.settings("").isEmpty());
        }
    }

    @Test
    void lazyExporter_madeAtTheFirstExportOnly_andNotAfterShutdown() {
        InMemorySpanExporter memory = InMemorySpanExporter.create();
        java.util.concurrent.atomic.AtomicInteger makes = new java.util.concurrent.atomic.AtomicInteger();
        OtelTracer.LazyExporter lazy = new OtelTracer.LazyExporter(() -> {
            makes.incrementAndGet();
            return memory;
        });
        assertTrue(lazy.flush().isSuccess(), "a flush before any span succeeds");
        assertFalse(lazy.made(), "a flush made the exporter");
        assertTrue(lazy.export(List.of()).isSuccess());
        assertTrue(lazy.export(List.of()).isSuccess());
        assertEquals(1, makes.get(), "made once, at the first export");
        assertTrue(lazy.shutdown().isSuccess());

        OtelTracer.LazyExporter unused = new OtelTracer.LazyExporter(() -> {
            makes.incrementAndGet();
            return memory;
        });
        assertTrue(unused.shutdown().isSuccess());
        assertFalse(unused.export(List.of()).isSuccess(), "an export after shutdown made an exporter");
        assertEquals(1, makes.get());
    }

    @Test
    void fromConfig_otlpBadUrl_failsAtOnce() {
        // The exporter is made at its first export; its url is still checked when the tracer is made
        assertThrows(IllegalArgumentException.class, () -> OtelTracer.fromConfig(List.of("opentelemetry,url=http://[bad")));
    }
}
