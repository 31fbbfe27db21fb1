package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.config.InstanceGroup;
import io.backplane.spi.config.InstanceKind;
import io.backplane.spi.config.ModelConfig;
import java.util.List;
import org.junit.jupiter.api.Test;

class SimplePbtxtTest {
    @Test
    void parse_sampleConfig_readsEveryField() {
        ModelConfig c = Fixtures.sampleConfig();
        assertEquals("saxpy_cuda", c.name());
        assertEquals("cuda", c.backend());
        assertEquals(64, c.maxBatchSize());
        assertEquals(List.of("X", "Y"), c.inputs().stream().map(t -> t.name()).toList());
        assertEquals(DataType.FP32, c.output("OUT").dataType());
        assertEquals(List.of(-1L), c.input("X").dims());
        assertEquals(List.of(InstanceGroup.of("group_0", 1, InstanceKind.GPU, List.of(0))), c.instanceGroups());
        assertNotNull(c.dynamicBatching());
        assertEquals("count, fp32:2.0, input:X, input:Y, output:OUT", c.parameters().get("kernel_args"));
    }

    @Test
    void parse_sampleConfig_agreesWithTheCoresParser() {
        ModelConfig core = io.backplane.core.config.ModelConfigParser.parseModelDirectory(Fixtures.SAMPLE);
        ModelConfig simple = Fixtures.sampleConfig();
        assertEquals(core.name(), simple.name());
        assertEquals(core.backend(), simple.backend());
        assertEquals(core.maxBatchSize(), simple.maxBatchSize());
        assertEquals(core.inputs(), simple.inputs());
        assertEquals(core.outputs(), simple.outputs());
        assertEquals(core.parameters(), simple.parameters());
        assertEquals(core.instanceGroups().stream().map(g -> List.of(g.kind(), g.count(), g.gpus())).toList(),
                simple.instanceGroups().stream().map(g -> List.of(g.kind(), g.count(), g.gpus())).toList());
        assertEquals(LaunchSpec.from(core), LaunchSpec.from(simple));
    }

    @Test
    void parse_unbalancedBraces_namesTheLine() {
        var e = assertThrows(BackplaneException.class, () -> SimplePbtxt.parse("name: \"m\"\ninput [ { name: \"X\" ]"));
        assertTrue(e.getMessage().startsWith("config.pbtxt line 2"), e.getMessage());
    }
}
