package io.backplane.plugin.http;

import com.fasterxml.jackson.core.JsonGenerator;
import io.backplane.spi.config.DynamicBatching;
import io.backplane.spi.config.EnsembleScheduling;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.config.QueuePolicy;
import io.backplane.spi.config.RateLimiterConfig;
import io.backplane.spi.config.TensorConfig;
import io.backplane.spi.config.VersionPolicy;
import io.netty.buffer.ByteBuf;
import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * A model config as Triton's REST API returns it: the JSON mapping of its {@code ModelConfig}
 * protobuf (64-bit integers as strings, as the protobuf JSON mapping writes them), for the
 * fields Backplane supports.
 */
final class ConfigJson {
    private ConfigJson() {
    }

    static ByteBuf write(ModelConfig c) {
        return Json.write(g -> {
            g.writeStartObject();
            g.writeStringField("name", c.name());
            g.writeStringField("platform", c.platform());
            g.writeStringField("backend", c.backend());
            g.writeObjectFieldStart("version_policy");
            switch (c.versionPolicy()) {
                case VersionPolicy.Latest l -> {
                    g.writeObjectFieldStart("latest");
                    g.writeNumberField("num_versions", l.numVersions());
                    g.writeEndObject();
                }
                case VersionPolicy.All a -> {
                    g.writeObjectFieldStart("all");
                    g.writeEndObject();
                }
                case VersionPolicy.Specific s -> {
                    g.writeObjectFieldStart("specific");
                    longs(g, "versions", s.versions());
                    g.writeEndObject();
                }
            }
            g.writeEndObject();
            g.writeNumberField("max_batch_size", c.maxBatchSize());
            tensors(g, "input", c.inputs(), true, c);
            tensors(g, "output", c.outputs(), false, c);
            g.writeArrayFieldStart("instance_group");
            for (InstanceGroup ig : c.instanceGroups()) {
                g.writeStartObject();
                g.writeStringField("name", ig.name());
                g.writeStringField("kind", "KIND_" + ig.kind().name());
                g.writeNumberField("count", ig.count());
                g.writeArrayFieldStart("gpus");
                for (int gpu : ig.gpus()) {
                    g.writeNumber(gpu);
                }
                g.writeEndArray();
                RateLimiterConfig rl = ig.rateLimiter();
                if (rl != null) {
                    g.writeObjectFieldStart("rate_limiter");
                    g.writeArrayFieldStart("resources");
                    for (RateLimiterConfig.Resource r : rl.resources()) {
                        g.writeStartObject();
                        g.writeStringField("name", r.name());
                        g.writeBooleanField("global", r.global());
                        g.writeNumberField("count", r.count());
                        g.writeEndObject();
                    }
                    g.writeEndArray();
                    g.writeNumberField("priority", rl.priority());
                    g.writeEndObject();
                }
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeStringField("default_model_filename", c.defaultModelFilename());
            DynamicBatching db = c.dynamicBatching();
            if (db != null) {
                g.writeObjectFieldStart("dynamic_batching");
                g.writeArrayFieldStart("preferred_batch_size");
                for (int p : db.preferredBatchSizes()) {
                    g.writeNumber(p);
                }
                g.writeEndArray();
                g.writeStringField("max_queue_delay_microseconds", Long.toString(db.maxQueueDelayMicros()));
                g.writeBooleanField("preserve_ordering", db.preserveOrdering());
                g.writeStringField("priority_levels", Integer.toString(db.priorityLevels()));
                g.writeStringField("default_priority_level", Integer.toString(db.defaultPriorityLevel()));
                g.writeFieldName("default_queue_policy");
                queuePolicy(g, db.defaultQueuePolicy());
                g.writeObjectFieldStart("priority_queue_policy");
                for (Map.Entry<Integer, QueuePolicy> e : db.priorityQueuePolicy().entrySet()) {
                    g.writeFieldName(Integer.toString(e.getKey()));
                    queuePolicy(g, e.getValue());
                }
                g.writeEndObject();
                g.writeEndObject();
            }
            g.writeObjectFieldStart("parameters");
            for (Map.Entry<String, String> e : c.parameters().entrySet()) {
                g.writeObjectFieldStart(e.getKey());
                g.writeStringField("string_value", e.getValue());
                g.writeEndObject();
            }
            g.writeEndObject();
            g.writeObjectFieldStart("model_transaction_policy");
            g.writeBooleanField("decoupled", c.decoupled());
            g.writeEndObject();
            g.writeObjectFieldStart("response_cache");
            g.writeBooleanField("enable", c.section("response_cache").flatMap(n -> n.value("enable")).map(v -> v.equals("true") || v.equals("1"))
                    .orElse(false));
            g.writeEndObject();
            EnsembleScheduling es = EnsembleScheduling.of(c).orElse(null);
            if (es != null) {
                ensemble(g, es);
            }
            g.writeEndObject();
        });
    }

    private static void ensemble(JsonGenerator g, EnsembleScheduling es) throws IOException {
        g.writeObjectFieldStart("ensemble_scheduling");
        g.writeArrayFieldStart("step");
        for (EnsembleScheduling.Step s : es.steps()) {
            g.writeStartObject();
            g.writeStringField("model_name", s.modelName());
            g.writeStringField("model_version", Long.toString(s.modelVersion()));
            stringMap(g, "input_map", s.inputMap());
            stringMap(g, "output_map", s.outputMap());
            g.writeStringField("model_namespace", "");
            g.writeEndObject();
        }
        g.writeEndArray();
        g.writeEndObject();
    }

    private static void stringMap(JsonGenerator g, String field, Map<String, String> map) throws IOException {
        g.writeObjectFieldStart(field);
        for (Map.Entry<String, String> e : map.entrySet()) {
            g.writeStringField(e.getKey(), e.getValue());
        }
        g.writeEndObject();
    }

    private static void queuePolicy(JsonGenerator g, QueuePolicy p) throws IOException {
        g.writeStartObject();
        g.writeStringField("timeout_action", p.timeoutAction().name());
        g.writeStringField("default_timeout_microseconds", Long.toString(p.defaultTimeoutMicros()));
        g.writeBooleanField("allow_timeout_override", p.allowTimeoutOverride());
        g.writeNumberField("max_queue_size", p.maxQueueSize());
        g.writeEndObject();
    }

    /** A field of the {@code input}/{@code output} entry named {@code tensor} in the parsed file, or {@code fallback}. */
    static String rawTensorField(ModelConfig c, String section, String tensor, String field, String fallback) {
        for (io.backplane.spi.config.ConfigNode n : c.raw().sections(section)) {
            if (n.value("name").orElse("").equals(tensor)) {
                return n.value(field).orElse(fallback);
            }
        }
        return fallback;
    }

    private static void tensors(JsonGenerator g, String field, List<TensorConfig> ts, boolean input, ModelConfig c) throws IOException {
        g.writeArrayFieldStart(field);
        for (TensorConfig t : ts) {
            g.writeStartObject();
            g.writeStringField("name", t.name());
            g.writeStringField("data_type", t.dataType().configName());
            longs(g, "dims", t.dims());
            List<Long> reshape = t.reshape();
            if (reshape != null) {
                g.writeObjectFieldStart("reshape");
                longs(g, "shape", reshape);
                g.writeEndObject();
            }
            if (input) {
                g.writeBooleanField("optional", t.optional());
                g.writeStringField("format", rawTensorField(c, field, t.name(), "format", "FORMAT_NONE"));
            } else {
                g.writeStringField("label_filename", rawTensorField(c, field, t.name(), "label_filename", ""));
            }
            g.writeEndObject();
        }
        g.writeEndArray();
    }

    private static void longs(JsonGenerator g, String field, List<Long> values) throws IOException {
        g.writeArrayFieldStart(field);
        for (long v : values) {
            g.writeString(Long.toString(v));
        }
        g.writeEndArray();
    }
}
