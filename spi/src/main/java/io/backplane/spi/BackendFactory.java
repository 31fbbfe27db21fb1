package io.backplane.spi;

/**
 * Creates a {@link Backend}. Discovered through {@link java.util.ServiceLoader}: list the
 * implementation in {@code META-INF/services/io.backplane.spi.BackendFactory} of the plugin jar.
 *
 * <p>The host instantiates each factory once per class loader with its public no-argument
 * constructor, and calls {@link #create} at most once per host, on a host thread with the
 * plugin's class loader as context class loader. Factories must be cheap to construct: heavy
 * work (native libraries, processes) belongs in {@link #create} or later.
 */
public interface BackendFactory {
    /**
     * The backend's name as {@code config.pbtxt}'s {@code backend} field names it, e.g.
     * {@code "python"}. Lower case, unique among the host's backends; never null.
     */
    String name();

    /**
     * Other names that select this backend in {@code config.pbtxt}'s {@code backend} field
     * (e.g. {@code "onnxruntime"}). Empty by default. Triton {@code platform} values belong in
     * {@link BackendCapabilities#platforms()}.
     */
    default java.util.Set<String> aliases() {
        return java.util.Set.of();
    }

    /**
     * What this backend serves and how (platforms, model file names, preferred instance kind,
     * batching, decoupled, config sections it reads itself). Called once per host, before any
     * model loads; must be cheap and must not fail. The default is
     * {@link BackendCapabilities#DEFAULT}.
     */
    default BackendCapabilities capabilities() {
        return BackendCapabilities.DEFAULT;
    }

    /**
     * The SPI version this factory was compiled against, or 0 (the default) to let the host read
     * it from the {@code Backplane-SPI-Version} attribute of the plugin jar's manifest, which
     * Backplane's build and archetype write. A plugin that overrides it should return
     * {@code Spi.VERSION}: the compiler copies the constant into the class. The host refuses a
     * plugin built against a newer SPI than its own, or an older one it no longer supports,
     * naming both versions.
     */
    default int spiVersion() {
        return 0;
    }

    /**
     * Creates the backend. Called once.
     *
     * @throws Exception any failure; the host logs it and reports the backend unavailable, and
     *     models naming it fail their load with that cause
     */
    Backend create(BackendContext context) throws Exception;
}
