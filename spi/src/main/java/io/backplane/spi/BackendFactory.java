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
     * Other names that select this backend (e.g. {@code "onnxruntime"}), and Triton
     * {@code platform} values it serves (e.g. {@code "onnxruntime_onnx"}). Empty by default.
     */
    default java.util.Set<String> aliases() {
        return java.util.Set.of();
    }

    /**
     * The SPI version this factory was compiled against. Implement it as
     * {@code return Spi.VERSION;}: the compiler copies the constant into your class, so the host
     * learns the version you built against and refuses a plugin newer than itself. The default
     * claims the host's own version.
     */
    default int spiVersion() {
        return Spi.VERSION;
    }

    /**
     * Creates the backend. Called once.
     *
     * @throws Exception any failure; the host logs it and reports the backend unavailable, and
     *     models naming it fail their load with that cause
     */
    Backend create(BackendContext context) throws Exception;
}
