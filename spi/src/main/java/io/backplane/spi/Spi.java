package io.backplane.spi;

/**
 * Facts about this SPI that the host and plugins exchange at bind time.
 */
public final class Spi {
    /**
     * The SPI version. It grows by one whenever a capability is added or a type changes shape.
     * Version 2 made the config types final classes with builders, added
     * {@link BackendCapabilities}, and moved the batcher SPI to {@code io.backplane.spi.batch};
     * it also added child requests ({@link ScheduledRequest#startChild}) and custom metrics
     * ({@link ModelContext#metrics()}, {@code io.backplane.spi.metrics}). Version 3 added flow
     * control: {@link ResponseSender#ready()} and {@code ResponseObserver.ready()}. Version 4 added
     * readiness checks that the model's code takes part in: {@link ModelInstance#checkReady()}. Version 5
     * added the host's check of files a backend opens by name: {@link ModelContext#checkedFile}, and
     * the generation figures a host reports to its listeners:
     * {@link io.backplane.spi.host.HostListener#responseSent} and
     * {@link io.backplane.spi.host.ModelStatistics#generation()}. Version 6 added the helpers for
     * backends over an in-process engine ({@code io.backplane.spi.engine}: batching rows into one
     * engine call and back, per-request errors, native state freed safely) and
     * {@link io.backplane.spi.config.TensorConfig#modelDims()}.
     */
    public static final int VERSION = 6;

    /**
     * The oldest plugin SPI version this host still loads. A backend built against version 1
     * that used no removed constructor and no batcher type keeps working.
     */
    public static final int OLDEST_SUPPORTED_VERSION = 1;

    /**
     * The manifest attribute that carries the SPI version a plugin jar was built against
     * ({@code Backplane-SPI-Version: 6}). The spi jar's own manifest carries its version under the
     * same name; Backplane's build and archetype write it into every plugin jar. The host reads it
     * from the jar that holds a plugin's factory class when the factory does not report a version
     * itself, and assumes {@link #OLDEST_SUPPORTED_VERSION} (with a warning) when neither says.
     */
    public static final String MANIFEST_ATTRIBUTE = "Backplane-SPI-Version";

    private Spi() {
    }
}
