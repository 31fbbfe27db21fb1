package io.backplane.core.repository;

import io.backplane.spi.BackplaneException;
import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Where the files of one model may really be: under the root of the repository the model was found
 * in, every symbolic link followed. Links as such are fine (Kubernetes mounts a ConfigMap through
 * links inside the mount, {@code config.pbtxt -> ..data/config.pbtxt}); a file or folder whose real
 * path leaves the root is refused with INVALID_ARGUMENT, naming the link, where it points and what
 * to do. The reference is the root's own real path, taken at each check, so a root that is itself a
 * link is fine.
 *
 * <p>A host started with links out of the repository allowed ({@code --allow-links-outside-repository})
 * and models without a repository folder ({@link #NONE}: defined in code, the host's own warm-up
 * models) check nothing. A model loaded with {@code file:} overrides has its private folder as its root.
 *
 * <p>Immutable and thread-safe; every check reads the file system now (nothing is cached), so a link
 * changed since the last check is judged as it is now.
 */
public final class FileRoot {
    /** How deep {@link #checkModelFolder} looks, as deep as the poll-mode fingerprint (16 folders under the model folder). */
    public static final int MAX_DEPTH = 16;

    /** No root: nothing is checked (models defined in code, the host's own models). */
    public static final FileRoot NONE = new FileRoot(null, true);

    /** What to do, at the end of every refusal. */
    static final String WHAT_TO_DO = "copy it into the model repository, or start the server with --allow-links-outside-repository"
            + " (embedded: BackplaneHost.Builder.allowLinksOutsideRepository(true)) to serve files from outside it";

    private final @Nullable Path root;
    private final boolean linksOutAllowed;

    private FileRoot(@Nullable Path root, boolean linksOutAllowed) {
        this.root = root;
        this.linksOutAllowed = linksOutAllowed;
    }

    /**
     * The rule for the models under {@code root}.
     *
     * @param root a repository root (or the private folder of a load with files), made absolute here
     * @param linksOutAllowed true: nothing is checked
     */
    public static FileRoot of(Path root, boolean linksOutAllowed) {
        return new FileRoot(root.toAbsolutePath().normalize(), linksOutAllowed);
    }

    /** The root, absolute; null for {@link #NONE}. */
    public @Nullable Path root() {
        return root;
    }

    /** Whether files leaving the root are allowed (true for {@link #NONE}). */
    public boolean linksOutAllowed() {
        return linksOutAllowed;
    }

    /** Whether checks do anything: there is a root and links out are refused. */
    public boolean checks() {
        return root != null && !linksOutAllowed;
    }

    /**
     * {@code path}, unchanged, after checking that its real path (links followed, as the kernel
     * resolves it when the file is opened) is under the root. A path that does not exist is returned
     * unchanged: there is nothing to read, and the caller reports it missing.
     *
     * @param what what the path is, for the error ("model 'm': default_model_filename")
     * @throws BackplaneException INVALID_ARGUMENT when it leaves the root, naming the link that leads
     *     out and its target; also for a link loop on the way
     */
    public Path checkFile(Path path, String what) {
        if (!checks()) {
            return path;
        }
        Path realRoot = realRoot();
        Path absolute = path.toAbsolutePath();
        Path real;
        try {
            real = absolute.toRealPath();
        } catch (NoSuchFileException e) {
            return path;
        } catch (IOException e) {
            throw unresolvable(what + " " + path, absolute, e);
        }
        if (!real.startsWith(realRoot)) {
            throw outside(what, path, culprit(absolute, realRoot), real);
        }
        return path;
    }

    /**
     * Checks every visible file and folder of the model folder {@code modelDir} and every hidden
     * link in it (hidden folders, names starting with '.', are not walked into, as the fingerprint
     * skips them; the folder itself is checked too), at most
     * {@link #MAX_DEPTH} folders deep. Each real folder is listed once, so the cost is one
     * {@code lstat} per entry plus one resolution per link. A link inside the root is followed and
     * what it leads to is checked too.
     *
     * @param model the model's name, for the error
     * @throws BackplaneException INVALID_ARGUMENT naming the first entry found whose real path leaves
     *     the root (the link, its target, its real path), or a link loop (the link and the folder it
     *     leads back to)
     */
    public void checkModelFolder(Path modelDir, String model) {
        if (!checks()) {
            return;
        }
        Path realRoot = realRoot();
        Path dir = modelDir.toAbsolutePath();
        Path realDir;
        try {
            realDir = dir.toRealPath();
        } catch (NoSuchFileException e) {
            return; // gone since the scan: reading it fails next, naming it
        } catch (IOException e) {
            throw unresolvable("model '" + model + "': its folder", dir, e);
        }
        if (!realDir.startsWith(realRoot)) {
            throw outside("model '" + model + "': its folder", dir, culprit(dir, realRoot), realDir);
        }
        walk(model, dir, realDir, 0, realRoot, new ArrayDeque<>(), new HashSet<>());
    }

    private void walk(String model, Path dir, Path realDir, int depth, Path realRoot, ArrayDeque<Path> chain, Set<Path> listed) {
        if (!listed.add(realDir)) {
            return; // reached before through another link: already checked
        }
        chain.push(realDir);
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
            for (Path entry : entries) {
                // Hidden entries are not walked (a ConfigMap's ..data is reached through the visible links into it),
                // but a hidden link is still checked: a backend may open a hidden file by name (default_model_filename).
                boolean hidden = entry.getFileName().toString().startsWith(".");
                BasicFileAttributes attrs;
                try {
                    attrs = Files.readAttributes(entry, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                } catch (NoSuchFileException e) {
                    continue; // removed while listed
                }
                Path real;
                if (attrs.isSymbolicLink()) {
                    try {
                        real = entry.toRealPath();
                    } catch (NoSuchFileException e) {
                        continue; // a dangling link: nothing there to read
                    } catch (IOException e) {
                        throw unresolvable("model '" + model + "': " + entry, entry, e);
                    }
                    if (!real.startsWith(realRoot)) {
                        throw outside("model '" + model + "':", entry, entry, real);
                    }
                    if (hidden || !Files.isDirectory(real)) {
                        continue;
                    }
                    if (chain.contains(real)) {
                        throw BackplaneException.invalid("model '" + model + "': " + entry + " is a link to " + target(entry)
                                + ", which leads back to " + real + ", a folder that holds the link: a link loop; remove the link or point it"
                                + " elsewhere");
                    }
                } else if (attrs.isDirectory() && !hidden) {
                    real = realDir.resolve(entry.getFileName().toString());
                } else {
                    continue;
                }
                if (depth + 1 < MAX_DEPTH) {
                    walk(model, entry, real, depth + 1, realRoot, chain, listed);
                }
            }
        } catch (AccessDeniedException e) {
            // a folder this process cannot list, it cannot read from either
        } catch (IOException e) {
            throw unresolvable("model '" + model + "': " + dir, dir, e);
        } catch (java.nio.file.DirectoryIteratorException e) {
            throw unresolvable("model '" + model + "': " + dir, dir, e.getCause());
        } finally {
            chain.pop();
        }
    }

    private Path realRoot() {
        Path r = java.util.Objects.requireNonNull(root);
        try {
            return r.toRealPath();
        } catch (IOException e) {
            throw BackplaneException.invalid("model repository " + r + " cannot be resolved: " + e);
        }
    }

    /**
     * The link that leads {@code path} out of the root: the first component of it that is a link
     * whose folder is under the root and whose real path is not; {@code path} itself when none is
     * (an absolute path that never was in the repository).
     */
    private static Path culprit(Path path, Path realRoot) {
        Path p = path.getRoot();
        for (Path name : path) {
            p = p == null ? name : p.resolve(name);
            Path parent = p.getParent();
            try {
                if (parent != null && Files.isSymbolicLink(p) && parent.toRealPath().startsWith(realRoot) && !p.toRealPath().startsWith(realRoot)) {
                    return p;
                }
            } catch (IOException e) {
                return path;
            }
        }
        return path;
    }

    /** "{@code what path}[: {@code link}] is a symbolic link to T (really R), outside the model repository ROOT; what to do". */
    private BackplaneException outside(String what, Path path, Path link, Path real) {
        String subject = what + " " + path + (link.equals(path.toAbsolutePath()) || link.equals(path) ? "" : ": " + link);
        if (Files.isSymbolicLink(link)) {
            return BackplaneException.invalid(subject + " is a symbolic link to " + target(link) + " (really " + real
                    + "), outside the model repository " + root + "; " + WHAT_TO_DO);
        }
        String where = real.equals(path.toAbsolutePath().normalize()) ? " is" : " is really " + real + ",";
        return BackplaneException.invalid(subject + where + " outside the model repository " + root + "; " + WHAT_TO_DO);
    }

    private static BackplaneException unresolvable(String what, Path path, IOException e) {
        if (e instanceof FileSystemException fse && fse.getReason() != null && fse.getReason().contains("symbolic links")) {
            return BackplaneException.invalid(what + ": " + path + " cannot be resolved, a link loop (" + fse.getReason()
                    + "); remove the link that leads back or point it elsewhere");
        }
        return BackplaneException.invalid(what + ": " + path + " cannot be resolved: " + e);
    }

    private static String target(Path link) {
        try {
            return Files.readSymbolicLink(link).toString();
        } catch (IOException | UnsupportedOperationException e) {
            return "?";
        }
    }

    @Override
    public String toString() {
        return root == null ? "no repository root" : root + (linksOutAllowed ? " (links out allowed)" : "");
    }
}
