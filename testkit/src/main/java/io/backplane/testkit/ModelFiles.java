package io.backplane.testkit;

import io.backplane.core.config.ModelConfigParser;
import io.backplane.core.config.VersionFolders;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The files of a model defined in code: written into the folders the core hands the backend
 * ({@code ModelContext.modelDirectory()} and {@code versionDirectory()}) before
 * {@code autoCompleteConfig} and {@code loadModel} run. Immutable.
 */
record ModelFiles(Map<String, byte[]> modelFiles, Map<String, byte[]> versionFiles) {
    static final ModelFiles NONE = new ModelFiles(Map.of(), Map.of());

    ModelFiles {
        modelFiles = Map.copyOf(modelFiles);
        versionFiles = Map.copyOf(versionFiles);
    }

    /** Writes every file that is not there yet; safe to call for each load of the model. */
    synchronized void writeInto(Path modelDirectory, Path versionDirectory) {
        try {
            write(modelDirectory, modelFiles);
            write(versionDirectory, versionFiles);
        } catch (IOException e) {
            throw new UncheckedIOException("could not write the test model's files into " + modelDirectory, e);
        }
    }

    private static void write(Path dir, Map<String, byte[]> files) throws IOException {
        Files.createDirectories(dir);
        for (Map.Entry<String, byte[]> f : files.entrySet()) {
            Path p = dir.resolve(f.getKey());
            if (!Files.exists(p)) {
                Files.createDirectories(p.getParent());
                Files.write(p, f.getValue());
            }
        }
    }

    /**
     * The files of a Triton model folder as a host would serve them: every file of its highest
     * version folder, and the files of the model folder itself except {@code config.pbtxt}.
     */
    static ModelFiles ofFolder(Path dir) {
        List<Long> versions = VersionFolders.scan(dir).versions();
        Map<String, byte[]> version = versions.isEmpty() ? Map.of() : readTree(dir.resolve(Long.toString(versions.getLast())));
        return new ModelFiles(readFlat(dir, ModelConfigParser.CONFIG_FILE), version);
    }

    /** A relative path that stays inside its folder; throws naming the bad path otherwise. */
    static String checked(String relativePath) {
        Path p = Path.of(relativePath);
        if (p.isAbsolute() || p.normalize().startsWith("..")) {
            throw new IllegalArgumentException("file path '" + relativePath + "' must be relative and stay inside the folder");
        }
        return relativePath;
    }

    /** Every regular file under {@code dir}, recursively, by relative path. */
    static Map<String, byte[]> readTree(Path dir) {
        Map<String, byte[]> out = new LinkedHashMap<>();
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path f : s.filter(Files::isRegularFile).sorted().toList()) {
                out.put(dir.relativize(f).toString(), Files.readAllBytes(f));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read model files from " + dir, e);
        }
        return out;
    }

    /** The regular files directly in {@code dir} except {@code except}, by name. */
    static Map<String, byte[]> readFlat(Path dir, String except) {
        Map<String, byte[]> out = new LinkedHashMap<>();
        try (Stream<Path> s = Files.list(dir)) {
            for (Path f : s.filter(Files::isRegularFile).sorted().toList()) {
                if (!f.getFileName().toString().equals(except)) {
                    out.put(f.getFileName().toString(), Files.readAllBytes(f));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read model folder " + dir, e);
        }
        return out;
    }
}
