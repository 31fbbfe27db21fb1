package io.backplane.backend.fil;

import io.backplane.spi.Backend;
import io.backplane.spi.BackendCapabilities;
import io.backplane.spi.BackendContext;
import io.backplane.spi.BackendFactory;
import io.backplane.spi.Spi;
import io.backplane.spi.config.InstanceKind;

/**
 * The {@code fil} backend: tree models (XGBoost, LightGBM) with Triton FIL's configuration
 * ({@code backend: "fil"}, {@code model_type}, {@code output_class}/{@code is_classifier},
 * {@code predict_proba}, {@code threshold}, {@code input__0}/{@code output__0}). Registered in
 * {@code META-INF/services/io.backplane.spi.BackendFactory}; cheap to construct (no native
 * library loads before the first model of its kind).
 */
public final class FilBackendFactory implements BackendFactory {
    /** The backend's name, Triton's: {@code backend: "fil"}. */
    public static final String NAME = "fil";

    @Override
    public String name() {
        return NAME;
    }

    /**
     * CPU, batching (rows of several requests go to the library in one call), never decoupled, no
     * child requests, and a side-effect-free execute (a prediction reads its inputs only).
     */
    @Override
    public BackendCapabilities capabilities() {
        return BackendCapabilities.builder().preferredInstanceKind(InstanceKind.CPU).batching(true).decoupled(false).childRequests(false)
                .sideEffectFreeExecute(true).build();
    }

    @Override
    public int spiVersion() {
        return Spi.VERSION;
    }

    @Override
    public Backend create(BackendContext context) {
        return new FilBackend(context);
    }
}
