package io.backplane.backend.cpu;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtLoggingLevel;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process-wide ONNX Runtime environment, as seen from this class loader.
 *
 * <p><b>Native library.</b> ORT's {@code OnnxRuntime.init()} extracts {@code libonnxruntime} and
 * its JNI library into a fresh temporary directory and loads them with {@code System.load} once
 * per class loader that defines the {@code ai.onnxruntime} classes. The host gives each plugin
 * directory one class loader for its whole life, so the library loads once per host, and
 * unloading and loading models again never reloads it: the environment below is created once and
 * never closed (ORT documents that an environment lives until the process ends).
 *
 * <p><b>The extracted files.</b> ORT only marks that directory {@code deleteOnExit}, which a JVM
 * that ends by {@code Runtime.halt} (as {@code backplane serve} does after a signal) or by a
 * SIGKILL never runs: every process would leave about 22 MB in {@code java.io.tmpdir}. Once the
 * environment exists both libraries are mapped, so {@link #removeExtractedLibraries} unlinks them
 * and their directory at once (Linux keeps a mapped file's pages until the process ends; where
 * there is no {@code /proc/self/maps} the files stay for {@code deleteOnExit}).
 *
 * <p><b>Two class loaders.</b> A JNI library binds to one class loader: loading the same file
 * path from a second loader fails with "already loaded in another classloader". Because ORT
 * extracts to a new temporary path per loader, a second loader (a second host in the same
 * process, or the cpu backend jar present in two plugin directories) does not fail: it maps a
 * second, independent copy of the runtime, with its own environment and threads, costing its
 * size in memory (about 20 MB) until that loader is collected. That is safe, because the two
 * copies share no objects: an {@code OnnxTensor} from one loader cannot even be passed to the
 * other (different classes). It breaks only when {@code -Donnxruntime.native.path} (or
 * {@code onnxruntime.native.onnxruntime.path}) pins one file for all loaders: then the second
 * loader's load fails, and {@link #environment()} turns that into a clear UNAVAILABLE error. To
 * share one runtime between hosts, put the ORT jar on the application class path instead of in
 * the plugin directory and let both hosts use that.
 */
final class Ort {
    private static final Logger LOG = LoggerFactory.getLogger(Ort.class);
    private static volatile @Nullable OrtEnvironment environment;

    private Ort() {
    }

    /**
     * The environment, created (and the native library loaded) on first use.
     *
     * @throws BackplaneException UNAVAILABLE when the native library cannot load here
     */
    static OrtEnvironment environment() {
        OrtEnvironment env = environment;
        if (env != null) {
            return env;
        }
        synchronized (Ort.class) {
            if (environment == null) {
                if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
                    throw new BackplaneException(ErrorCode.UNAVAILABLE,
                            "the cpu backend needs a little-endian machine: Backplane tensors are little-endian and ONNX Runtime reads them in place");
                }
                try {
                    environment = OrtEnvironment.getEnvironment(OrtLoggingLevel.ORT_LOGGING_LEVEL_WARNING, "backplane");
                } catch (LinkageError | RuntimeException e) {
                    throw new BackplaneException(ErrorCode.UNAVAILABLE, "ONNX Runtime's native library did not load in class loader "
                            + Ort.class.getClassLoader() + ": " + e
                            + ". If -Donnxruntime.native.path is set and another class loader already loaded that file, unset it"
                            + " (each class loader then extracts its own copy) or put the ORT jar on the application class path", e);
                }
                LOG.info("ONNX Runtime {} loaded in class loader {} (providers {})", environment.getVersion(),
                        Ort.class.getClassLoader(), OrtEnvironment.getAvailableProviders());
                removeExtractedLibraries(Path.of("/proc/self/maps"));
            }
            return environment;
        }
    }

    /**
     * Deletes the {@code onnxruntime-java*} directories whose {@code libonnxruntime*} files
     * {@code maps} (a {@code /proc/PID/maps}) shows mapped, with the files in them; returns them.
     * Never throws: what cannot be deleted is logged and left to {@code deleteOnExit}.
     */
    static List<Path> removeExtractedLibraries(Path maps) {
        Set<Path> dirs = new TreeSet<>();
        try {
            if (!Files.isReadable(maps)) {
                return List.of();
            }
            for (String line : Files.readAllLines(maps)) {
                int slash = line.indexOf('/');
                if (slash < 0) {
                    continue;
                }
                Path lib = Path.of(line.substring(slash).replace(" (deleted)", ""));
                Path dir = lib.getParent();
                if (lib.getFileName().toString().startsWith("libonnxruntime") && dir != null && dir.getFileName().toString().startsWith("onnxruntime-java")) {
                    dirs.add(dir);
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("could not read {} to find ONNX Runtime's extracted libraries ({}); they stay until the JVM exits normally", maps, e.toString());
            return List.of();
        }
        List<Path> removed = new ArrayList<>();
        for (Path dir : dirs) {
            try (Stream<Path> files = Files.list(dir)) {
                for (Path f : files.toList()) {
                    Files.deleteIfExists(f);
                }
                Files.deleteIfExists(dir);
                removed.add(dir);
            } catch (IOException e) {
                LOG.warn("could not delete ONNX Runtime's extracted libraries in {} ({}); they stay until the JVM exits normally", dir, e.toString());
            }
        }
        LOG.debug("deleted ONNX Runtime's extracted libraries (mapped, so still in use): {}", removed);
        return removed;
    }

    /** ORT's version, loading it if needed. */
    static String version() {
        return environment().getVersion();
    }
}
