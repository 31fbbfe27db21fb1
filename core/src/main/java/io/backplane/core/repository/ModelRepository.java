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
 *
 * <p>Links: a model's files may be symbolic links, but unless links out are allowed, {@link #read}
 * refuses a model with a file or folder whose real path leaves the root it was found in
 * ({@link FileRoot}), and the fingerprint does not follow such a link (it records where it points).
 */
public final class ModelRepository {
    private static final Logger LOG = LoggerFactory.getLogger(ModelRepository.class);
    private static final int MAX_FINGERPRINT_DEPTH = 16;

    private final List<Path> roots;
    private final BackendCatalog catalog;
    private final boolean linksOutAllowed;

    /** A repository whose configs are parsed with no backend known ({@link BackendCatalog#NONE}); links out refused. */
    public ModelRepository(List<Path> roots) {
        this(roots, BackendCatalog.NONE);
    }

    /** As {@link #ModelRepository(List, BackendCatalog, boolean)}, links out of the roots refused. */
    public ModelRepository(List<Path> roots, BackendCatalog catalog) {
        this(roots, catalog, false);
    }

    /**
     * @param roots repository directories, searched in order
     * @param catalog what the installed backends declared (platforms, model file names, sections they read)
     * @param linksOutAllowed whether a model's files may really be outside its root ({@link FileRoot})
     * @throws BackplaneException INVALID_ARGUMENT when the list is empty, a root is not a directory, or
     *     a root is listed twice
     */
    public ModelRepository(List<Path> roots, BackendCatalog catalog, boolean linksOutAllowed) {
        this.catalog = java.util.Objects.requireNonNull(catalog, "catalog is null");
        this.linksOutAllowed = linksOutAllowed;
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
     *     INVALID_ARGUMENT for a bad config, a name found in two roots, no version to serve, or a file
     *     or folder of the model that really is outside its root ({@link FileRoot#checkModelFolder})
     */
    public RepositoryModel read(String name) {
        Map<String, List<Path>> models = scan();
        List<Path> dirs = models.get(name);
        if (dirs == null) {
            throw BackplaneException.notFound("model '" + name + "' is not in the model repository " + roots + "; available models: "
                    + models.keySet());
        }
        Path dir = single(name, dirs);
        FileRoot files = fileRoot(dir);
        // Taken before the files are read: if they change during the read, the next poll sees a new fingerprint.
        String fingerprint = fingerprint(dir, files);
        files.checkModelFolder(dir, name);
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
        return new RepositoryModel(name, dir, config, served, folders.versions(), fingerprint, files);
    }

    /**
     * The rule for the files of model {@code name} ({@link FileRoot}: the root it is in), or
     * {@link FileRoot#NONE} when no root has it.
     *
     * @throws BackplaneException INVALID_ARGUMENT when the name is in more than one root
     */
    public FileRoot fileRoot(String name) {
        Path dir = directory(name);
        return dir == null ? FileRoot.NONE : fileRoot(dir);
    }

    /** Whether a model's files may really be outside its root. */
    public boolean linksOutAllowed() {
        return linksOutAllowed;
    }

    private FileRoot fileRoot(Path modelDir) {
        // scan() lists each root: a model folder's parent is its root
        return FileRoot.of(java.util.Objects.requireNonNull(modelDir.getParent()), linksOutAllowed);
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
     * file's size and modification time (symbolic links followed, except, while links out are refused,
     * one whose real path leaves the root: its target is recorded instead, so the walk never wanders
     * outside the repository). Two equal fingerprints mean nothing poll mode watches has changed.
     */
    public Map<String, String> fingerprints() {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, List<Path>> e : scan().entrySet()) {
            if (e.getValue().size() == 1) {
                Path dir = e.getValue().getFirst();
                out.put(e.getKey(), fingerprint(dir, fileRoot(dir)));
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

    private static String fingerprint(Path modelDir, FileRoot files) {
        MessageDigest digest = sha256();
        List<String> entries = new ArrayList<>();
        Path realRoot = realRoot(files);
        try {
            Files.walkFileTree(modelDir, EnumSet.of(FileVisitOption.FOLLOW_LINKS), MAX_FINGERPRINT_DEPTH, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                    if (!dir.equals(modelDir) && hidden(dir)) {
                        return FileVisitResult.SKIP_SUBTREE;
                    }
                    if (realRoot != null && Files.isSymbolicLink(dir)) {
                        String out = leavesRoot(dir, realRoot);
                        if (out != null) {
                            // refused at load anyway: record where it leads, never walk a tree outside the repository
                            entries.add("l " + modelDir.relativize(dir) + " " + out);
                            return FileVisitResult.SKIP_SUBTREE;
                        }
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
            String configOut = realRoot != null && Files.isRegularFile(config) ? leavesRoot(config, realRoot) : null;
            if (configOut != null) {
                entries.add("l c " + configOut); // refused at load: its content is not read
            } else if (Files.isRegularFile(config)) {
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

    /** The root's real path when links out are refused, else null (nothing to stop at); null too when it cannot be resolved. */
    private static @org.jspecify.annotations.Nullable Path realRoot(FileRoot files) {
        Path root = files.root();
        if (!files.checks() || root == null) {
            return null;
        }
        try {
            return root.toRealPath();
        } catch (IOException e) {
            return null;
        }
    }

    /** The real path of {@code dir} (a link, or a file reached through one) when it leaves {@code realRoot}, else null. */
    private static @org.jspecify.annotations.Nullable String leavesRoot(Path dir, Path realRoot) {
        try {
            Path real = dir.toRealPath();
            return real.startsWith(realRoot) ? null : real.toString();
        } catch (IOException e) {
            return null; // the walk reports what it cannot read
        }
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
