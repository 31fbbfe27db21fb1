package io.backplane.core.internal;

import static java.util.Objects.requireNonNull;

import io.backplane.core.config.BackendCatalog;
import io.backplane.core.config.JsonConfig;
import io.backplane.core.config.ModelConfigParser;
import io.backplane.core.config.VersionFolders;
import io.backplane.core.repository.FileRoot;
import io.backplane.core.repository.ModelRepository;
import io.backplane.core.repository.RepositoryModel;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.config.ModelConfig;
import io.backplane.spi.host.LoadOverride;
import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Turns a {@link LoadOverride} into a model definition (Triton's repository extension). A config
 * alone applies to the repository's model folder; files go, with the config, into a private
 * folder under one temporary directory the host owns ({@code backplane-load-*}, mode 700),
 * created on first use in {@code java.io.tmpdir} and removed with everything in it by {@link #close()}. Nothing is ever
 * written anywhere else: every file name is checked to be a path of plain segments inside the model
 * folder (no {@code ..}, no backslash), files are created new in folders this class just
 * created (so no link can be followed), and the total size is bounded. One leading {@code /}
 * names the model folder's root, as in Triton ({@code file:/1/model.py}); it never leads outside.
 */
final class LoadOverrides implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(LoadOverrides.class);
    /** Largest total size of the files of one load. */
    static final long MAX_BYTES = 1L << 30;
    /** Most files in one load. */
    static final int MAX_FILES = 10_000;
    private static final int MAX_DEPTH = 16;

    private final BackendCatalog catalog;
    private final boolean linksOutAllowed;
    private final AtomicLong sequence = new AtomicLong();
    private @Nullable Path root;
    private boolean closed;

    /** @param linksOutAllowed the host's option: whether a model's files may really be outside its root ({@link FileRoot}) */
    LoadOverrides(BackendCatalog catalog, boolean linksOutAllowed) {
        this.catalog = requireNonNull(catalog, "catalog is null");
        this.linksOutAllowed = linksOutAllowed;
    }

    /** A definition and the private folder made for it (null when the repository folder is used). */
    record Defined(ModelSource.Definition definition, @Nullable Path folder) {
    }

    /**
     * The definition of {@code name} under {@code override}.
     *
     * @param repositoryFolder the model's folder in the repository, or null when it has none
     * @param repositoryFiles the rule for its files there ({@link ModelSource#fileRoot}); a model loaded
     *     with files has its private folder as its root instead
     */
    Defined define(String name, LoadOverride override, @Nullable Path repositoryFolder, FileRoot repositoryFiles) {
        String config = override.config();
        if (config == null) {
            throw BackplaneException.invalid("load of model '" + name + "': file: parameters " + override.files().keySet()
                    + " need a 'config' parameter too (the model config the files go with)");
        }
        String text = toText(name, config);
        if (override.files().isEmpty()) {
            if (repositoryFolder == null) {
                throw BackplaneException.notFound("load of model '" + name + "' with a 'config' parameter: the model is not in the model"
                        + " repository; send its files as file:<version>/<name> parameters too");
            }
            repositoryFiles.checkModelFolder(repositoryFolder, name);
            ModelConfig parsed = ModelConfigParser.parse(text, "load parameter 'config' of model '" + name + "'", name, catalog, repositoryFolder);
            VersionFolders folders = VersionFolders.scan(repositoryFolder);
            List<Long> served = parsed.versionPolicy().select(folders.versions());
            if (served.isEmpty()) {
                throw BackplaneException.invalid("load parameter 'config' of model '" + name + "': version_policy " + parsed.versionPolicy()
                        + " selects none of the version folders " + folders.versions() + " in " + repositoryFolder);
            }
            return new Defined(new ModelSource.Definition(name, repositoryFolder, parsed, served, "override:" + text.hashCode(), repositoryFiles),
                    null);
        }
        checkName(name);
        Map<String, byte[]> files = checkFiles(name, override);
        Path folder = newFolder(name);
        try {
            Path modelDir = Files.createDirectory(folder.resolve(name));
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                write(name, modelDir, f.getKey(), f.getValue());
            }
            Files.writeString(modelDir.resolve(ModelConfigParser.CONFIG_FILE), text, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            // The private folder is the model's root: a backend's checkedFile keeps it to these files.
            RepositoryModel m = new ModelRepository(List.of(folder), catalog, linksOutAllowed).read(name);
            return new Defined(new ModelSource.Definition(name, m.directory(), m.config(), m.servedVersions(), m.fingerprint(), m.files()), folder);
        } catch (IOException e) {
            delete(folder);
            throw new BackplaneException(ErrorCode.INTERNAL, "load of model '" + name + "': cannot write its files under " + folder + ": " + e, e);
        } catch (RuntimeException e) {
            delete(folder);
            throw e;
        }
    }

    private static String toText(String name, String json) {
        return JsonConfig.toText(json, "load parameter 'config' of model '" + name + "'");
    }

    private static void checkName(String name) {
        ModelNames.check(name);
    }

    /**
     * Checks the file names and sizes of {@code override} and returns its files by their path
     * relative to the model folder: one leading {@code /} names the model folder's root, as in
     * Triton ({@code file:/1/model.py} is {@code file:1/model.py}).
     */
    private static Map<String, byte[]> checkFiles(String name, LoadOverride override) {
        if (override.files().size() > MAX_FILES) {
            throw BackplaneException.invalid("load of model '" + name + "': " + override.files().size() + " file: parameters, more than "
                    + MAX_FILES);
        }
        long bytes = override.fileBytes();
        if (bytes > MAX_BYTES) {
            throw new BackplaneException(ErrorCode.TOO_LARGE, "load of model '" + name + "': the files hold " + bytes + " bytes, more than "
                    + MAX_BYTES + "; put large models in the repository");
        }
        Map<String, byte[]> files = new LinkedHashMap<>();
        Map<String, String> given = new HashMap<>();
        for (Map.Entry<String, byte[]> f : override.files().entrySet()) {
            String path = f.getKey();
            String relative = path.startsWith("/") ? path.substring(1) : path;
            String[] segments = relative.split("/", -1);
            boolean ok = !relative.isEmpty() && segments.length <= MAX_DEPTH;
            for (String s : segments) {
                ok &= plainSegment(s);
            }
            if (!ok) {
                throw BackplaneException.invalid("load parameter 'file:" + path + "' of model '" + name + "': the file name must be a"
                        + " path inside the model folder, like file:1/model.onnx or file:/1/model.onnx (segments of letters, digits,"
                        + " '.', '_', '-'; no '..', no empty segment, at most one leading '/', at most " + MAX_DEPTH + " levels)");
            }
            if (relative.equals(ModelConfigParser.CONFIG_FILE)) {
                throw BackplaneException.invalid("load parameter 'file:" + path + "' of model '" + name
                        + "': the config comes from the 'config' parameter, not from a file");
            }
            String before = given.putIfAbsent(relative, path);
            if (before != null) {
                throw BackplaneException.invalid("load parameters 'file:" + before + "' and 'file:" + path + "' of model '" + name
                        + "' name the same file " + relative + "; send it once");
            }
            files.put(relative, f.getValue());
        }
        return files;
    }

    private static boolean plainSegment(String s) {
        if (s.isEmpty() || s.equals(".") || s.equals("..") || s.length() > 255) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (!(Character.isLetterOrDigit(c) || c == '.' || c == '_' || c == '-')) {
                return false;
            }
        }
        return true;
    }

    private static void write(String name, Path modelDir, String path, byte[] content) throws IOException {
        Path target = modelDir.resolve(path).normalize();
        if (!target.startsWith(modelDir) || target.equals(modelDir)) {
            throw BackplaneException.invalid("load parameter 'file:" + path + "' of model '" + name + "' leaves the model folder");
        }
        Path parent = requireNonNull(target.getParent());
        for (Path p = modelDir; !p.equals(parent);) {
            p = p.resolve(parent.getName(p.getNameCount()).toString());
            if (Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                throw BackplaneException.invalid("load parameter 'file:" + path + "' of model '" + name + "': "
                        + modelDir.relativize(p) + " is a file, not a folder");
            }
            if (!Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                Files.createDirectory(p);
            }
        }
        if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
            throw BackplaneException.invalid("load parameter 'file:" + path + "' of model '" + name + "': a folder of the same name"
                    + " holds other files");
        }
        Files.write(target, content, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
    }

    /** A new private folder under the root (created on first use, removed at close) for the files of model {@code name}. */
    synchronized Path newFolder(String name) {
        if (closed) {
            throw BackplaneException.unavailable("the host is closing; model '" + name + "' cannot load");
        }
        try {
            if (root == null) {
                // The property as it is now (a test harness may set it late), not the JVM's start-up value.
                root = Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "backplane-load-" + ProcessHandle.current().pid() + "-",
                        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            }
            return Files.createDirectory(root.resolve(Long.toString(sequence.incrementAndGet())));
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INTERNAL, "cannot create a folder for the files of model '" + name + "': " + e, e);
        }
    }

    /** Removes a folder made by {@link #define}, with everything in it (links are removed, never followed). */
    static void delete(@Nullable Path folder) {
        if (folder == null || !Files.exists(folder, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try {
            Files.walkFileTree(folder, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    Files.delete(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path dir, @Nullable IOException e) throws IOException {
                    Files.delete(dir);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            log.warn("could not remove the load files in {}: {}", folder, e.toString());
        }
    }

    /** The private root folder, or null before the first load with files (for tests). */
    synchronized @Nullable Path root() {
        return root;
    }

    /** Removes the root folder and every model folder left in it; later loads with files are refused. */
    @Override
    public synchronized void close() {
        closed = true;
        delete(root);
    }
}
