package io.backplane.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the CUDA driver library once per process and per library name, and says whether it can
 * be used.
 *
 * <p>The library is opened with {@link SymbolLookup#libraryLookup(String, Arena)} in
 * {@link Arena#global()}: it is never unloaded, whatever happens to the plugin class loader that
 * asked for it (a plugin loader may close; a native library must not be opened twice by two
 * loaders). The outcome, success or the reason for failure, is cached in a static map, so a
 * reload of the backend sees the same driver and never tries {@code dlopen} again.
 */
final class CudaLibrary {
    /** The driver library's soname. */
    static final String DEFAULT_LIBRARY = "libcuda.so.1";
    /** Oldest driver accepted: CUDA 11.0 introduced the {@code _v2} primary-context functions bound here. */
    static final int MINIMUM_DRIVER_VERSION = 11000;

    private static final Logger LOG = LoggerFactory.getLogger(CudaLibrary.class);
    private static final ConcurrentHashMap<String, Status> LOADED = new ConcurrentHashMap<>();

    private CudaLibrary() {
    }

    /**
     * Whether CUDA can be used through {@code library}: the library opened, every symbol bound,
     * the driver new enough, {@code cuInit} succeeded and at least one device is visible.
     *
     * @param driver the bound driver, or null when the library could not be opened or bound
     * @param driverVersion {@code cuDriverGetVersion}, 0 when unknown
     * @param deviceCount visible devices, 0 when unknown
     * @param problem what is missing, in words a user can act on; null when usable
     */
    record Status(String library, @Nullable CudaDriver driver, int driverVersion, int deviceCount, @Nullable String problem) {
        boolean usable() {
            return problem == null && driver != null;
        }

        /** The usable driver. @throws IllegalStateException when not {@link #usable()} */
        CudaDriver requireDriver() {
            if (!usable()) {
                throw new IllegalStateException("CUDA is not usable: " + problem);
            }
            return driver;
        }
    }

    /** The status of {@code library}, loading it on the first call for that name. */
    @SuppressWarnings("restricted")
    static Status load(String library) {
        return LOADED.computeIfAbsent(library, name -> open(name, n -> SymbolLookup.libraryLookup(n, Arena.global())));
    }

    /** Opens and probes {@code library} through {@code opener}; never throws. */
    static Status open(String library, Function<String, SymbolLookup> opener) {
        SymbolLookup lookup;
        try {
            lookup = opener.apply(library);
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            String problem = "the CUDA driver library " + library + " could not be loaded (" + e.getMessage()
                    + "); install the NVIDIA driver, or run on a machine with an NVIDIA GPU";
            LOG.info("CUDA backend: {}", problem);
            return new Status(library, null, 0, 0, problem);
        }
        CudaDriver driver;
        try {
            driver = FfmCudaDriver.bind(lookup);
        } catch (RuntimeException e) {
            String problem = "the CUDA driver library " + library + " is unusable: " + e.getMessage();
            LOG.warn("CUDA backend: {}", problem);
            return new Status(library, null, 0, 0, problem);
        }
        return probe(library, driver);
    }

    /** Checks a bound driver: version, {@code cuInit}, device count; never throws. */
    static Status probe(String library, CudaDriver driver) {
        int version = 0;
        try {
            version = driver.driverVersion();
            if (version < MINIMUM_DRIVER_VERSION) {
                return unusable(library, driver, version, 0, "the CUDA driver supports CUDA " + versionString(version)
                        + " but this backend needs CUDA " + versionString(MINIMUM_DRIVER_VERSION) + " or newer; update the NVIDIA driver");
            }
            driver.init();
            int count = driver.deviceCount();
            if (count == 0) {
                return unusable(library, driver, version, 0, "the CUDA driver (CUDA " + versionString(version)
                        + ") sees no CUDA device; check the GPU and CUDA_VISIBLE_DEVICES");
            }
            LOG.info("CUDA backend: {} loaded, driver for CUDA {}, {} device(s)", library, versionString(version), count);
            return new Status(library, driver, version, count, null);
        } catch (CudaException e) {
            String what = e.result() == 100 ? "the CUDA driver sees no CUDA device (" + e.getMessage() + "); check the GPU and CUDA_VISIBLE_DEVICES"
                    : e.result() == 34 ? "the CUDA driver library is a stub, not a real driver (" + e.getMessage() + "); install the NVIDIA driver"
                    : "the CUDA driver failed to start: " + e.getMessage();
            return unusable(library, driver, version, 0, what);
        }
    }

    private static Status unusable(String library, CudaDriver driver, int version, int count, String problem) {
        LOG.info("CUDA backend: {}", problem);
        return new Status(library, driver, version, count, problem);
    }

    /** {@code 12040} as {@code "12.4"}. */
    static String versionString(int version) {
        return version / 1000 + "." + (version % 1000) / 10;
    }
}
