package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.core.JsonGenerator;
import io.backplane.spi.host.InferenceService;
import io.backplane.spi.host.ModelStatistics;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpMethod;
import java.io.IOException;
import java.util.List;

/**
 * Triton's statistics extension: {@code GET /v2/models/stats} (every model, {@code call.model()}
 * is {@code ""}) and {@code GET /v2/models/<m>[/versions/<v>]/stats}. Owns the body's shape,
 * {@code {"model_stats":[...]}} with Triton's field names, and that it is written from one
 * snapshot per model as the host hands it over (durations as {@code count}/{@code ns} pairs).
 * Each model also carries Backplane's {@code generation_stats} ({@code first_token} and
 * {@code inter_token} as {@code count}/{@code ns} pairs, {@code output_tokens} a count), a key
 * Triton does not have; Triton's clients read the keys they know and pass over it.
 */
final class StatisticsHandler implements RestRoute {
    private final InferenceService service;

    StatisticsHandler(InferenceService service) {
        this.service = requireNonNull(service, "service is null");
    }

    @Override
    public void serve(RestCall call) {
        call.requireMethod(HttpMethod.GET);
        call.sendJson(statistics(service.statistics(call.model(), call.version())));
    }

    private static ByteBuf statistics(List<ModelStatistics> all) {
        return Json.write(g -> {
            g.writeStartObject();
            g.writeArrayFieldStart("model_stats");
            for (ModelStatistics st : all) {
                g.writeStartObject();
                g.writeStringField("name", st.name());
                g.writeStringField("version", Long.toString(st.version()));
                g.writeNumberField("last_inference", st.lastInference());
                g.writeNumberField("inference_count", st.inferenceCount());
                g.writeNumberField("execution_count", st.executionCount());
                g.writeObjectFieldStart("inference_stats");
                duration(g, "success", st.success());
                duration(g, "fail", st.fail());
                duration(g, "queue", st.queue());
                duration(g, "compute_input", st.computeInput());
                duration(g, "compute_infer", st.computeInfer());
                duration(g, "compute_output", st.computeOutput());
                duration(g, "cache_hit", st.cacheHit());
                duration(g, "cache_miss", st.cacheMiss());
                g.writeEndObject();
                g.writeArrayFieldStart("batch_stats");
                for (ModelStatistics.BatchStatistics b : st.batches()) {
                    g.writeStartObject();
                    g.writeNumberField("batch_size", b.batchSize());
                    duration(g, "compute_input", b.computeInput());
                    duration(g, "compute_infer", b.computeInfer());
                    duration(g, "compute_output", b.computeOutput());
                    g.writeEndObject();
                }
                g.writeEndArray();
                g.writeArrayFieldStart("memory_usage");
                for (ModelStatistics.MemoryUsage mu : st.memoryUsage()) {
                    g.writeStartObject();
                    g.writeStringField("type", mu.type());
                    g.writeNumberField("id", mu.id());
                    g.writeNumberField("byte_size", mu.bytes());
                    g.writeEndObject();
                }
                g.writeEndArray();
                ModelStatistics.Generation gen = st.generation();
                g.writeObjectFieldStart("generation_stats");
                duration(g, "first_token", gen.firstToken());
                duration(g, "inter_token", gen.interToken());
                g.writeNumberField("output_tokens", gen.outputTokens());
                g.writeEndObject();
                g.writeObjectFieldStart("instance_stats"); // Backplane's own, beside generation_stats: instances now
                g.writeNumberField("count", st.instances());
                g.writeEndObject();
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeEndObject();
        });
    }

    private static void duration(JsonGenerator g, String name, ModelStatistics.Duration d) throws IOException {
        g.writeObjectFieldStart(name);
        g.writeNumberField("count", d.count());
        g.writeNumberField("ns", d.nanos());
        g.writeEndObject();
    }
}
