package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;
import java.util.List;
import java.util.ServiceLoader;
import java.util.Set;
import org.junit.jupiter.api.Test;

class OnnxBackendFactoryTest {
    @Test
    void serviceLoader_classPath_findsCpuBackendWithTritonNamesAndCapabilities() {
        BackendFactory f = ServiceLoader.load(BackendFactory.class).stream().map(ServiceLoader.Provider::get)
                .filter(p -> p.name().equals("cpu")).findFirst().orElseThrow();
        assertEquals(OnnxBackendFactory.class, f.getClass());
        assertEquals(Set.of("onnxruntime"), f.aliases());
        BackendCapabilities caps = f.capabilities();
        assertEquals(Set.of("onnxruntime_onnx"), caps.platforms());
        assertEquals(List.of("model.onnx"), caps.modelFileNames());
        assertEquals(InstanceKind.CPU, caps.preferredInstanceKind());
        assertTrue(caps.batching());
        assertFalse(caps.decoupled());
        assertEquals(Spi.VERSION, f.spiVersion());
    }
}
