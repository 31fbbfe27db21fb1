package io.backplane.core.testing;

import io.backplane.core.config.BackendCatalog;
import io.backplane.spi.BackendCapabilities;
import java.util.Map;

/** What this repository's backends declare, as a host would see them, plus a backend that reads {@code optimization} and {@code model_operations} itself. */
public final class TestCatalog {
    public static final BackendCatalog CATALOG = BackendCatalog.of(Map.of(
            "python", BackendCapabilities.builder().modelFileNames("model.py").build(),
            "cpu", BackendCapabilities.builder().platforms("onnxruntime_onnx").modelFileNames("model.onnx").build(),
            "cuda", BackendCapabilities.builder().modelFileNames("model.ptx", "model.cubin").build(),
            "tuned", BackendCapabilities.builder().configSections("optimization", "model_operations").build()));

    private TestCatalog() {
    }
}
