package io.backplane.backend.fil;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the two libraries' native code once per class loader, leaving no file behind in the
 * temporary folder (SCENARIOS "a plugin whose native library unpacks itself to the temporary
 * folder: nothing of it remains after the server exits, however it exits").
 *
 * <ul>
 *   <li><b>xgboost4j</b> unpacks {@code libxgboost4j<random>.so} into {@code java.io.tmpdir} on
 *       its first use and only asks the JVM to delete it at a normal exit. After its loader ran,
 *       this class finds the file in the process's own mappings ({@code /proc/self/maps}) and
 *       deletes it at once: the library stays mapped, and a server killed later leaves nothing.
 *   <li><b>lightgbm4j</b>'s {@code LGBMBooster} unpacks to fixed names ({@code /tmp/lib_lightgbm.so},
 *       shared by every process of the machine, overwritten by each) and never deletes them. This
 *       backend never touches {@code LGBMBooster}: it unpacks the two libraries of the lightgbm4j
 *       jar into a private folder of its own, loads them, and deletes folder and files at once,
 *       then calls LightGBM through lightgbm4j's SWIG API ({@code com.microsoft.ml.lightgbm.lightgbmlib}).
 * </ul>
 *
 * <p>Both load into this plugin's class loader, which the host never closes while it runs
 * (STYLE 8); a second host in the same JVM with its own plugin loader loads its own copies.
 */
final class NativeLibraries {
    private static final Logger LOG = LoggerFactory.getLogger(NativeLibraries.class);
    private static boolean xgboost;
    private static boolean lightgbm;

    private NativeLibraries() {
    }

    /** Loads xgboost4j's native library (idempotent) and deletes the file it unpacked. */
    static synchronized void xgboost() {
        if (xgboost) {
            return;
        }
        try {
            // XGBoostJNI's static initializer runs xgboost4j's own loader (NativeLibLoader.initXGBoost).
            Class.forName("ml.dmlc.xgboost4j.java.XGBoostJNI", true, NativeLibraries.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError | RuntimeException e) {
            throw new BackplaneException(ErrorCode.UNAVAILABLE, "the fil backend could not load xgboost4j's native library (" + e
                    + "); it needs libgomp (e.g. apt-get install libgomp1) on " + platform(), e);
        }
        deleteUnpacked("libxgboost4j");
        xgboost = true;
    }

    /** Loads lightgbm4j's two native libraries from a private folder (idempotent), then deletes it. */
    @SuppressWarnings("restricted") // System.load: the host runs with --enable-native-access=ALL-UNNAMED
    static synchronized void lightgbm() {
        if (lightgbm) {
            return;
        }
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        String dir;
        String ext;
        if (os.startsWith("linux")) {
            dir = "linux";
            ext = ".so";
        } else if (os.startsWith("mac")) {
            dir = "osx";
            ext = ".dylib";
        } else if (os.startsWith("windows")) {
            dir = "windows";
            ext = ".dll";
        } else {
            throw unsupported();
        }
        String cpu = switch (arch) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch64";
            default -> throw unsupported();
        };
        String prefix = "lightgbm4j/" + dir + "/" + cpu + "/";
        Path folder = null;
        try {
            folder = Files.createTempDirectory("backplane-fil-lightgbm-");
            for (String lib : List.of("lib_lightgbm" + ext, "lib_lightgbm_swig" + ext)) {
                Path file = folder.resolve(lib);
                try (InputStream in = NativeLibraries.class.getClassLoader().getResourceAsStream(prefix + lib)) {
                    if (in == null) {
                        throw new BackplaneException(ErrorCode.UNAVAILABLE, "the fil backend found no " + prefix + lib
                                + " in lightgbm4j's jar; put lightgbm4j-*.jar into the plugin's lib/ folder");
                    }
                    Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                }
                System.load(file.toString());
            }
        } catch (IOException | UnsatisfiedLinkError e) {
            throw new BackplaneException(ErrorCode.UNAVAILABLE, "the fil backend could not load LightGBM's native library (" + e
                    + "); it needs libgomp (e.g. apt-get install libgomp1) on " + platform(), e);
        } finally {
            deleteTree(folder);
        }
        lightgbm = true;
    }

    private static BackplaneException unsupported() {
        return new BackplaneException(ErrorCode.UNSUPPORTED, "lightgbm4j bundles no native library for " + platform()
                + "; serve LightGBM models on Linux or macOS (x86_64, aarch64) or Windows x86_64");
    }

    private static String platform() {
        return System.getProperty("os.name") + " " + System.getProperty("os.arch");
    }

    /** Deletes files of the temporary folder named {@code prefix*} that this process has mapped (Linux). */
    static void deleteUnpacked(String prefix) {
        Path maps = Path.of("/proc/self/maps");
        if (!Files.isReadable(maps)) {
            return; // not Linux: xgboost4j's deleteOnExit is all there is
        }
        // File.createTempFile's names: prefix, a random number, the suffix (wherever java.io.tmpdir pointed when it first ran)
        java.util.regex.Pattern unpacked = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(prefix) + "\\d+\\.(so|dylib|dll)");
        try {
            for (String line : Files.readAllLines(maps)) {
                int slash = line.indexOf('/');
                if (slash < 0 || line.endsWith(" (deleted)")) {
                    continue;
                }
                Path file = Path.of(line.substring(slash));
                Path name = file.getFileName();
                if (name != null && unpacked.matcher(name.toString()).matches() && Files.deleteIfExists(file)) {
                    LOG.debug("deleted {} (unpacked by {}; it stays mapped)", file, prefix);
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("could not delete the native library {} unpacked into {}: {}", prefix, System.getProperty("java.io.tmpdir"), e.toString());
        }
    }

    private static void deleteTree(Path folder) {
        if (folder == null) {
            return;
        }
        try (var files = Files.list(folder)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
            Files.deleteIfExists(folder);
        } catch (IOException e) {
            LOG.warn("could not delete {}: {}", folder, e.toString());
        }
    }
}
