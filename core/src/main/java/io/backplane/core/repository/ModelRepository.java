package io.backplane.core.repository;

import io.backplane.core.config.BackendCatalog;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.core.config.VersionFolders;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileVisitOption;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One or more Triton-layout model repositories: every non-hidden directory under a root is a model
 * ({@code <root>/<model>/config.pbtxt}, {@code <root>/<model>/<version>/...}). The repository is
 * read from disk on every call, never cached, so that poll mode sees changes; it is thread-safe.
 *
 * <p>A model name found under two roots is an error for that model only (its {@link #read} names
 * both paths); the other models stay usable.
 */
public final class ModelRepository {
    private static final Logger LOG = LoggerFactory.getLogger(ModelRepository.class);
    private static final int MAX_FINGERPRINT_DEPTH = 16;

    private final List<Path> roots;
    private final BackendCatalog catalog;

    /** A repository whose configs are parsed with no backend known ({@link BackendCatalog#NONE}). */
    public ModelRepository(List<Path> roots) {
        this(roots, BackendCatalog.NONE);
    }

    /**
     * @param roots repository directories, searched in order
     * @param catalog what the installed backends declared (platforms, model file names, sections they read)
     * @throws BackplaneException INVALID_ARGUMENT when the list is empty, a root is not a directory, or
     *     a root is listed twice
     */
    public ModelRepository(List<Path> roots, BackendCatalog catalog) {
        this.catalog = java.util.Objects.requireNonNull(catalog, "catalog is null");
        if (roots.isEmpty()) {
            throw BackplaneException.invalid("no model repository given; name at least one directory");
        }
        List<Path> normalized = new ArrayList<>();
        for (Path root : roots) {
            Path p = root.toAbsolutePath().normalize();
            if (!Files.isDirectory(p)) {
                throw BackplaneException.invalid("model repository " + p + " does not exist or is not a directory");
            }
            if (normalized.contains(p)) {
                throw BackplaneException.invalid("model repository " + p + " is listed twice; list each root once");
            }
            normalized.add(p);
        }
        this.roots = List.copyOf(normalized);
    }

    /** The repository roots, absolute, in search order. */
    public List<Path> roots() {
        return roots;
    }

    /** Names of the model directories in all roots, sorted; hidden directories are skipped. */
    public List<String> modelNames() {
        return List.copyOf(scan().keySet());
    }

    /**
     * Reads model {@code name}: its configuration, version folders and fingerprint.
     *
     * @throws BackplaneException NOT_FOUND listing the available names when there is no such model;
     *     INVALID_ARGUMENT for a bad config, a name found in two roots, or no version to serve
     */
    public RepositoryModel read(String name) {
        Map<String, List<Path>> models = scan();
        List<Path> dirs = models.get(name);
        if (dirs == null) {
            throw BackplaneException.notFound("model '" + name + "' is not in the model repository " + roots + "; available models: "
                    + models.keySet());
        }
        Path dir = single(name, dirs);
        // Taken before the files are read: if they change during the read, the next poll sees a new fingerprint.
        String fingerprint = fingerprint(dir);
        ModelConfig config = ModelConfigParser.parseModelDirectory(dir, catalog);
        VersionFolders folders = VersionFolders.scan(dir);
        if (!folders.ignored().isEmpty()) {
            LOG.info("model '{}': ignoring non-numeric folder(s) {} in {}; version folders must be named by numbers", name,
                    folders.ignored(), dir);
        }
        if (folders.versions().isEmpty()) {
            throw BackplaneException.invalid(dir + ": model '" + name + "' has no numeric version folder; create " + dir.resolve("1")
                    + " holding the model file");
        }
        List<Long> served = config.versionPolicy().select(folders.versions());
        if (served.isEmpty()) {
            throw BackplaneException.invalid(dir + ": model '" + name + "': version_policy " + config.versionPolicy()
                    + " selects none of the version folders " + folders.versions() + "; fix the policy or add the folders");
        }
        return new RepositoryModel(name, dir, config, served, folders.versions(), fingerprint);
    }

    /**
     * The folder of model {@code name} without reading it, or null when no root has it.
     *
     * @throws BackplaneException INVALID_ARGUMENT when the name is in more than one root
     */
    public @org.jspecify.annotations.Nullable Path directory(String name) {
        List<Path> dirs = scan().get(name);
        return dirs == null ? null : single(name, dirs);
    }

    /**
     * A fingerprint per model, for poll-mode change detection: a hash of the config file's content and
     * of the relative path of every non-hidden file and folder under the model directory, with each
     * file's size and modification time (symbolic links followed). Two equal fingerprints mean nothing poll mode
     * watches has changed.
     */
    public Map<String, String> fingerprints() {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, List<Path>> e : scan().entrySet()) {
            if (e.getValue().size() == 1) {
                out.put(e.getKey(), fingerprint(e.getValue().getFirst()));
            } else {
                // Changes whenever the set of clashing directories changes; read() reports the clash.
                out.put(e.getKey(), "duplicate:" + hash(e.getValue().toString().getBytes(StandardCharsets.UTF_8)));
            }
        }
        return out;
    }

    private Path single(String name, List<Path> dirs) {
        if (dirs.size() > 1) {
            throw BackplaneException.invalid("model '" + name + "' is in more than one model repository: " + dirs
                    + "; rename or remove all but one");
        }
        return dirs.getFirst();
    }

    private Map<String, List<Path>> scan() {
        Map<String, List<Path>> models = new TreeMap<>();
        for (Path root : roots) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
                for (Path p : entries) {
                    String name = p.getFileName().toString();
                    if (name.startsWith(".") || !Files.isDirectory(p)) {
                        continue;
                    }
                    models.computeIfAbsent(name, n -> new ArrayList<>()).add(p);
                }
            } catch (IOException e) {
                throw new BackplaneException(ErrorCode.UNAVAILABLE, "cannot list model repository " + root + ": " + e, e);
            }
        }
        return models;
    }

    private static String fingerprint(Path modelDir) {
        MessageDigest digest = sha256();
        List<String> entries = new ArrayList<>();
        try {
            Files.walkFileTree(modelDir, EnumSet.of(FileVisitOption.FOLLOW_LINKS), MAX_FINGERPRINT_DEPTH, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                    if (!dir.equals(modelDir) && hidden(dir)) {
                        return FileVisitResult.SKIP_SUBTREE;
                    }
                    // No directory mtime: it changes with hidden files too; the file entries cover real changes.
                    entries.add("d " + modelDir.relativize(dir));
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                    if (!hidden(file)) {
                        entries.add("f " + modelDir.relativize(file) + " " + attrs.size() + " " + attrs.lastModifiedTime().toMillis());
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException e) {
                    // Vanished mid-walk, unreadable, or a link loop: part of the fingerprint, not a failure.
                    entries.add("? " + modelDir.relativize(file) + " " + e.getClass().getSimpleName());
                    return FileVisitResult.CONTINUE;
                }
            });
            Path config = modelDir.resolve(ModelConfigParser.CONFIG_FILE);
            if (Files.isRegularFile(config)) {
                // Content too: an edit within the file system's timestamp granularity keeps size and mtime.
                entries.add("c " + hash(Files.readAllBytes(config)));
            }
        } catch (IOException e) {
            entries.add("! " + e);
        }
        entries.sort(null);
        for (String entry : entries) {
            digest.update(entry.getBytes(StandardCharsets.UTF_8));
            digest.update((byte) '\n');
        }
        return HexFormat.of().formatHex(digest.digest(), 0, 16);
    }

    private static boolean hidden(Path p) {
        return p.getFileName() != null && p.getFileName().toString().startsWith(".");
    }

    private static String hash(byte[] bytes) {
        return HexFormat.of().formatHex(sha256().digest(bytes), 0, 16);
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every Java platform", e);
        }
    }
}
