package io.backplane.spi.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.DataType;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ConfigTypesTest {
    @Test
    void configTypes_haveNoPublicConstructors_soFieldsCanBeAdded() {
        for (Class<?> c : List.of(ModelConfig.class, TensorConfig.class, InstanceGroup.class, DynamicBatching.class, QueuePolicy.class,
                ConfigNode.class, ModelConfig.Builder.class, TensorConfig.Builder.class, RateLimiterConfig.class, RateLimiterConfig.Resource.class,
                RateLimiterConfig.Builder.class)) {
            assertTrue(Modifier.isFinal(c.getModifiers()), c + " is final");
            assertFalse(c.isRecord(), c + " is not a record");
            assertEquals(List.of(), Arrays.stream(c.getConstructors()).toList(), c + " has no public constructor");
        }
    }

    @Test
    void modelConfig_toBuilder_roundTripsEveryField() {
        ConfigNode raw = ConfigNode.builder().add("name", "m").add("optimization", ConfigNode.builder().add("priority", "PRIORITY_MAX").build())
                .build();
        ModelConfig c = ModelConfig.builder("m").platform("p").backend("b").maxBatchSize(8)
                .input(TensorConfig.builder("X", DataType.FP32).dims(-1, 4).reshape(List.of(2L, -1L, 2L)).optional(true).build())
                .output(TensorConfig.of("Y", DataType.INT64, 3)).instanceGroup(InstanceGroup.of("g", 2, InstanceKind.GPU, List.of(0, 1)))
                .dynamicBatching(DynamicBatching.builder().preferredBatchSizes(List.of(4)).maxQueueDelayMicros(100).priorityLevels(2)
                        .defaultPriorityLevel(1).priorityQueuePolicy(2, QueuePolicy.of(TimeoutAction.DELAY, 5, true, 3)).build())
                .versionPolicy(new VersionPolicy.Latest(2)).decoupled(true).parameter("k", "v").defaultModelFilename("f.bin").raw(raw).build();
        ModelConfig copy = c.toBuilder().build();
        assertEquals(c, copy);
        assertEquals(c.hashCode(), copy.hashCode());
        assertEquals(c.toString(), copy.toString());
        assertNotEquals(c, c.toBuilder().decoupled(false).build());
        assertEquals("PRIORITY_MAX", c.section("optimization").orElseThrow().value("priority").orElseThrow());
        assertEquals("renamed", c.toBuilder().name("renamed").build().name());
    }

    @Test
    void modelConfig_copiesWhatItIsGiven_andReturnsUnmodifiableViews() {
        List<Long> dims = new ArrayList<>(List.of(4L));
        TensorConfig t = TensorConfig.builder("X", DataType.FP32).dims(dims).build();
        dims.add(5L);
        assertEquals(List.of(4L), t.dims(), "a later change to the caller's list does not reach the config");
        ModelConfig c = ModelConfig.builder("m").input(t).parameter("k", "v").build();
        assertThrows(UnsupportedOperationException.class, () -> c.inputs().add(t));
        assertThrows(UnsupportedOperationException.class, () -> c.parameters().put("x", "y"));
        assertThrows(UnsupportedOperationException.class, () -> t.dims().add(1L));
    }

    @Test
    void badValues_areRefused_namingTheValue() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> ModelConfig.builder("m").maxBatchSize(-2).build()).getMessage().contains("-2"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TensorConfig.of("X", DataType.FP32, -3)).getMessage().contains("-3"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> InstanceGroup.of("g", 0, InstanceKind.CPU, List.of())).getMessage()
                .contains("count 0"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> QueuePolicy.builder().maxQueueSize(-1).build()).getMessage().contains("-1"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> DynamicBatching.builder().priorityLevels(2).defaultPriorityLevel(3).build())
                .getMessage().contains("default_priority_level 3"));
    }

    @Test
    void rateLimiter_roundTripsThroughGroupBuilders_badValuesNamed() {
        RateLimiterConfig r = RateLimiterConfig.builder().resource(RateLimiterConfig.Resource.of("R1", false, 4))
                .resource(RateLimiterConfig.Resource.of("R2", true, 2)).priority(2).build();
        InstanceGroup g = InstanceGroup.builder("g").count(2).kind(InstanceKind.GPU).gpus(List.of(0, 1)).rateLimiter(r).build();
        assertEquals(g, g.toBuilder().build());
        assertEquals(r, g.rateLimiter());
        assertEquals(r, r.toBuilder().build());
        assertEquals(null, InstanceGroup.builder("g").build().rateLimiter(), "none by default");
        assertEquals(1, RateLimiterConfig.builder().build().effectivePriority(), "priority 0 counts as 1");
        assertTrue(assertThrows(IllegalArgumentException.class, () -> RateLimiterConfig.Resource.of(" ", false, 1)).getMessage().contains("empty"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> RateLimiterConfig.Resource.of("R", false, -1)).getMessage().contains("-1"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> RateLimiterConfig.builder().priority(-3).build()).getMessage().contains("-3"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> RateLimiterConfig.of(List.of(RateLimiterConfig.Resource.of("R", false, 1),
                RateLimiterConfig.Resource.of("R", true, 2)), 1)).getMessage().contains("'R' is listed twice"));
    }

    @Test
    void builders_startAtTritonDefaults() {
        assertEquals(QueuePolicy.DEFAULT, QueuePolicy.of(TimeoutAction.REJECT, 0, false, 0));
        assertEquals(DynamicBatching.DEFAULT, DynamicBatching.builder().build());
        InstanceGroup g = InstanceGroup.builder("g").build();
        assertEquals(1, g.count());
        assertEquals(InstanceKind.AUTO, g.kind());
        ModelConfig c = ModelConfig.builder("m").build();
        assertEquals(VersionPolicy.DEFAULT, c.versionPolicy());
        assertEquals(ConfigNode.EMPTY, c.raw());
        assertEquals(Map.of(), c.parameters());
    }

    @Test
    void configNode_keepsOrderAndKinds() {
        ConfigNode n = ConfigNode.builder().add("a", "1").add("a", "2").add("s", ConfigNode.builder().add("x", "y").build()).add("s",
                ConfigNode.EMPTY).build();
        assertEquals(List.of("1", "2"), n.values("a"));
        assertEquals(2, n.sections("s").size());
        assertEquals(List.of(), n.values("s"), "messages are not scalars");
        assertTrue(n.section("a").isEmpty(), "scalars are not messages");
        assertEquals(List.of("a", "s"), List.copyOf(n.fieldNames()));
        assertFalse(n.has("missing"));
        assertEquals("{a: 1, a: 2, s {x: y}, s {}}", n.toString());
    }
}
