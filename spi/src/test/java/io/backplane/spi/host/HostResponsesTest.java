package io.backplane.spi.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.InferenceResponse;
import io.backplane.spi.Tensor;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class HostResponsesTest {
    @Test
    void stamp_addressesACopy_andIsNotOnTheResponsesApi() {
        InferenceResponse r = InferenceResponse.of(List.of(Tensor.ofInts("X", new long[] {1}, 1)));
        InferenceResponse s = HostResponses.stamp(r, "m", 3, "id-1");
        assertEquals("m", s.modelName());
        assertEquals(3, s.modelVersion());
        assertEquals("id-1", s.requestId());
        assertEquals("", r.modelName(), "the original is unchanged");
        assertTrue(Arrays.stream(InferenceResponse.class.getMethods()).noneMatch(m -> m.getName().equals("stamped")), "backends cannot stamp");
        assertTrue(Arrays.stream(InferenceResponse.class.getDeclaredMethods()).filter(m -> m.getName().equals("stamped"))
                .allMatch(m -> Modifier.isPrivate(m.getModifiers())));
    }
}
