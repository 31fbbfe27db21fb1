package io.backplane.core.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.Model;
import io.backplane.spi.ModelContext;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code --backend-config NAME,key=value} reaches a backend under its name and under each of its aliases. */
class BackendOptionsTest {
    @TempDir
    Path work;

    /** A backend named "onnx-like" with the alias "onnxruntime", recording the options it was created with. */
    private static final class Recording implements BackendFactory {
        final AtomicReference<Map<String, String>> options = new AtomicReference<>();

        @Override
        public String name() {
            return "onnx-like";
        }

        @Override
        public Set<String> aliases() {
            return Set.of("onnxruntime");
        }

        @Override
        public Backend create(BackendContext context) {
            options.set(context.options());
            return new Backend() {
                @Override
                public Model loadModel(ModelContext ctx) {
                    throw BackplaneException.invalid("not used");
                }

                @Override
                public void close() {
                    // nothing to release
                }
            };
        }
    }

    private Map<String, String> optionsSeen(Map<String, Map<String, String>> given) {
        Recording f = new Recording();
        try (PluginManager pm = new PluginManager(List.of(f), List.of(), List.of(), getClass().getClassLoader(), given, work)) {
            pm.backend("onnxruntime", "m");
        }
        return f.options.get();
    }

    @Test
    void backendOption_givenUnderAlias_reachesTheBackend() {
        assertEquals(Map.of("intra_op_threads", "2"), optionsSeen(Map.of("onnxruntime", Map.of("intra_op_threads", "2"))));
    }

    @Test
    void backendOption_givenUnderNameAndAlias_merged() {
        assertEquals(Map.of("a", "1", "b", "2"), optionsSeen(Map.of("onnx-like", Map.of("a", "1"), "onnxruntime", Map.of("b", "2"))));
    }

    @Test
    void backendOption_sameKeyTwoValuesUnderNameAndAlias_refusedNamingBoth() {
        BackplaneException e = assertThrows(BackplaneException.class,
                () -> optionsSeen(Map.of("onnx-like", Map.of("a", "1"), "onnxruntime", Map.of("a", "2"))));
        assertTrue(e.getMessage().contains("onnx-like,a=1") && e.getMessage().contains("onnxruntime,a=2")
                || e.getMessage().contains("onnxruntime,a=2") && e.getMessage().contains("onnx-like,a=1"), e.getMessage());
    }
}
