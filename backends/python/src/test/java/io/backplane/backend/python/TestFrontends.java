package io.backplane.backend.python;

import io.backplane.spi.host.FrontendContext;
import io.backplane.spi.host.InferenceService;
import java.util.Map;

/** The frontend context the Python backend's end-to-end tests start REST and gRPC frontends with. */
final class TestFrontends {
    private TestFrontends() {
    }

    /** A context serving {@code service} with {@code options} (nothing shared, no tracer, no log control). */
    static FrontendContext context(InferenceService service, Map<String, String> options) {
        return new FrontendContext() {
            @Override
            public InferenceService service() {
                return service;
            }

            @Override
            public Map<String, String> options() {
                return options;
            }
        };
    }
}
