package io.backplane.core;

import io.backplane.core.internal.OwnedDirectory;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The private work folder of one {@link BackplaneHost} (model files of load overrides, and what
 * backends keep per host), under {@code java.io.tmpdir} as {@code backplane-*}: made at start
 * after the folders of dead hosts are reaped ({@link OwnedDirectory}), and removed when the host
 * closes or fails to start, so no file is left behind (L10).
 */
final class HostWorkDirectory {
    private static final Logger log = LoggerFactory.getLogger(BackplaneHost.class);

    private HostWorkDirectory() {
    }

    /** Reaps the work folders of dead hosts, then makes this host's. */
    static Path create() {
        try {
            Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
            List<Path> reaped = OwnedDirectory.reapStale(tmp, "backplane-");
            if (!reaped.isEmpty()) {
                log.info("removed {} work folder(s) left by dead hosts: {}", reaped.size(), reaped);
            }
            return OwnedDirectory.create(tmp, "backplane-");
        } catch (IOException e) {
            throw new BackplaneException(ErrorCode.INTERNAL, "cannot create a work directory: " + e.getMessage(), e);
        }
    }

    /** Removes {@code dir} and everything in it; a failure is logged, never thrown (close goes on). */
    static void delete(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    Files.delete(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, @Nullable IOException exc) throws IOException {
                    Files.delete(d);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            log.warn("could not remove work directory {}: {}", dir, e.getMessage());
        }
    }
}
