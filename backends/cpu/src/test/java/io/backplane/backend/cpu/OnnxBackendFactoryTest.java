package io.backplane.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import java.util.ServiceLoader;
import java.util.Set;
import org.junit.jupiter.api.Test;

class OnnxBackendFactoryTest {
    @Test
    void serviceLoader_classPath_findsCpuBackendWithTritonAliases() {
        BackendFactory f = ServiceLoader.load(BackendFactory.class).stream().map(ServiceLoader.Provider::get)
                .filter(p -> p.name().equals("cpu")).findFirst().orElseThrow();
        assertEquals(OnnxBackendFactory.class, f.getClass());
        assertEquals(Set.of("onnxruntime", "onnxruntime_onnx"), f.aliases());
        assertEquals(Spi.VERSION, f.spiVersion());
    }
}
