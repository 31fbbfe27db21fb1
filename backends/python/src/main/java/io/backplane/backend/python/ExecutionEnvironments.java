package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.ModelContext;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;
import org.apache.commons.compress.compressors.gzip.GzipCompressorInputStream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Triton's {@code EXECUTION_ENV_PATH}: a {@code .tar.gz} of a Python environment (conda-pack, or a
 * venv) that a model's stubs run in. Each archive is unpacked once per backend, into the backend's
 * work directory, keyed by its path, size and modification time; the stubs then run its
 * {@code bin/python3}. {@code $$TRITON_MODEL_DIRECTORY} in the path stands for the model's folder. A
 * folder (an environment already unpacked) is used in place. The path, absolute or not, goes through
 * the host's check ({@link ModelContext#checkedFile}): by default it must really be inside the model
 * repository.
 */
final class ExecutionEnvironments {
    private static final Logger log = LoggerFactory.getLogger(ExecutionEnvironments.class);
    static final String PARAMETER = "EXECUTION_ENV_PATH";
    static final String MODEL_DIRECTORY_VARIABLE = "$$TRITON_MODEL_DIRECTORY";

    private final Path root;
    private final ConcurrentHashMap<String, Path> unpacked = new ConcurrentHashMap<>();

    ExecutionEnvironments(Path root) {
        this.root = root;
    }

    /**
     * The interpreter of the model's execution environment, or null when the model names none.
     *
     * @throws BackplaneException INVALID_ARGUMENT when the host refuses the path (outside the model
     *     repository, by default), NOT_FOUND when it does not exist
     */
    @Nullable Path interpreter(ModelContext context, Map<String, String> parameters) {
        String value = parameters.get(PARAMETER);
        if (value == null || value.isBlank()) {
            return null;
        }
        String model = context.name();
        Path archive = Path.of(value.strip().replace(MODEL_DIRECTORY_VARIABLE, context.modelDirectory().toString())).toAbsolutePath().normalize();
        context.checkedFile(archive, "parameter " + PARAMETER + " '" + value.strip() + "'");
        if (Files.isDirectory(archive)) {
            return python(model, archive, archive); // an environment already unpacked: used in place
        }
        if (!Files.isRegularFile(archive)) {
            throw BackplaneException.notFound("model '" + model + "': " + PARAMETER + " names " + archive
                    + ", which does not exist; point it at a .tar.gz of a Python environment (conda-pack, or a packed venv)"
                    + " or at an unpacked environment's folder");
        }
        String key;
        try {
            key = archive + "|" + Files.size(archive) + "|" + Files.getLastModifiedTime(archive).toMillis();
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "model '" + model + "': cannot read " + archive + ": " + e, e);
        }
        return python(model, archive, unpacked.computeIfAbsent(key, k -> unpack(model, archive, k)));
    }

    private static Path python(String model, Path archive, Path env) {
        for (String name : new String[] {"bin/python3", "bin/python"}) {
            Path p = env.resolve(name);
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        throw BackplaneException.invalid("model '" + model + "': the execution environment " + archive + " holds no bin/python3;"
                + " pack a whole environment (conda-pack -o env.tar.gz, or tar -czf env.tar.gz -C <venv> .)");
    }

    private Path unpack(String model, Path archive, String key) {
        Path dir;
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
            dir = root.resolve("env-" + HexFormat.of().formatHex(digest, 0, 8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        Path partial = root.resolve(dir.getFileName() + ".partial");
        try {
            Files.createDirectories(root);
            deleteTree(partial);
            deleteTree(dir);
            Files.createDirectories(partial);
            Path realRoot = partial.toRealPath();
            int entries = 0;
            try (InputStream in = new BufferedInputStream(Files.newInputStream(archive));
                    TarArchiveInputStream tar = new TarArchiveInputStream(new GzipCompressorInputStream(in))) {
                TarArchiveEntry e;
                while ((e = tar.getNextEntry()) != null) {
                    entries++;
                    Path target = partial.resolve(e.getName()).normalize();
                    if (!target.startsWith(partial) || !target.equals(partial) && !existingAncestorInside(target, realRoot)) {
                        throw new IOException("entry '" + e.getName() + "' points outside the archive's folder");
                    }
                    if (e.isDirectory()) {
                        Files.createDirectories(target);
                    } else if (e.isSymbolicLink()) {
                        Files.createDirectories(target.getParent());
                        Files.deleteIfExists(target);
                        Files.createSymbolicLink(target, Path.of(e.getLinkName()));
                    } else if (e.isLink()) {
                        Path source = partial.resolve(e.getLinkName()).normalize();
                        if (!source.startsWith(partial)) {
                            throw new IOException("hard link '" + e.getName() + "' points outside the archive's folder");
                        }
                        Files.createDirectories(target.getParent());
                        Files.copy(source, target, StandardCopyOption.REPLACE_EXISTING);
                    } else if (e.isFile()) {
                        Files.createDirectories(target.getParent());
                        Files.copy(tar, target, StandardCopyOption.REPLACE_EXISTING);
                        Files.setPosixFilePermissions(target, permissions(e.getMode()));
                    }
                }
            }
            if (entries == 0) {
                throw new IOException("the archive is empty");
            }
            Files.move(partial, dir, StandardCopyOption.ATOMIC_MOVE);
            log.info("model '{}': unpacked execution environment {} into {}", model, archive, dir);
            return dir;
        } catch (IOException | RuntimeException e) {
            deleteTree(partial);
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "model '" + model + "': cannot unpack the execution environment "
                    + archive + " (" + PARAMETER + "): " + e.getMessage() + "; it must be a .tar.gz of a Python environment"
                    + " (conda-pack -o env.tar.gz, or tar -czf env.tar.gz -C <venv> .)", e);
        }
    }

    /**
     * Whether the deepest existing folder on the way to {@code target} really lies inside the
     * archive's folder: an earlier symbolic-link entry must not redirect later entries elsewhere.
     */
    private static boolean existingAncestorInside(Path target, Path realRoot) throws IOException {
        Path p = target.getParent();
        while (p != null && !Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            p = p.getParent();
        }
        return p != null && p.toRealPath().startsWith(realRoot);
    }

    private static Set<PosixFilePermission> permissions(int mode) {
        StringBuilder sb = new StringBuilder();
        String rwx = "rwxrwxrwx";
        for (int i = 0; i < 9; i++) {
            sb.append((mode & (1 << (8 - i))) != 0 ? rwx.charAt(i) : '-');
        }
        Set<PosixFilePermission> p = PosixFilePermissions.fromString(sb.toString());
        p.add(PosixFilePermission.OWNER_READ);
        p.add(PosixFilePermission.OWNER_WRITE);
        return p;
    }

    static void deleteTree(Path dir) {
        if (!Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    log.debug("cannot delete {}", p, e);
                }
            });
        } catch (IOException e) {
            log.debug("cannot delete {}", dir, e);
        }
    }
}
