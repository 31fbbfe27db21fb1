package io.backplane.core.internal;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileAttribute;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Temporary folders marked with their owner (a {@value #MARK} file holding the owning process's pid
 * and start time), so that the next start can remove those a dead (SIGKILLed) host left behind —
 * and only those: a folder is removed when its owner pid no longer runs, or runs with another start
 * time (the pid was reused). Folders without a readable mark are never touched: another host may be
 * creating one right now.
 */
public final class OwnedDirectory {
    private static final Logger log = LoggerFactory.getLogger(OwnedDirectory.class);
    static final String MARK = ".backplane-owner";

    private OwnedDirectory() {
    }

    /** Creates {@code <parent>/<prefix><random>} with {@code attrs} and marks it as this process's. */
    public static Path create(Path parent, String prefix, FileAttribute<?>... attrs) throws IOException {
        Path dir = Files.createTempDirectory(parent, prefix, attrs);
        Files.writeString(dir.resolve(MARK), identity(ProcessHandle.current()), StandardCharsets.US_ASCII);
        return dir;
    }

    /** {@code "<pid> <start epoch millis>"}; the start time is -1 where the system does not tell it. */
    static String identity(ProcessHandle p) {
        return p.pid() + " " + p.info().startInstant().map(Instant::toEpochMilli).orElse(-1L);
    }

    /** Removes the folders {@code <parent>/<prefix>*} whose marked owner is dead; returns them. */
    public static List<Path> reapStale(Path parent, String prefix) {
        List<Path> removed = new ArrayList<>();
        if (!Files.isDirectory(parent)) {
            return removed;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(parent, prefix + "*")) {
            for (Path dir : ds) {
                if (Files.isDirectory(dir) && ownerIsDead(dir)) {
                    deleteTree(dir);
                    removed.add(dir);
                }
            }
        } catch (IOException | RuntimeException e) {
            log.debug("cannot scan {} for stale {}* folders", parent, prefix, e);
        }
        return removed;
    }

    static boolean ownerIsDead(Path dir) {
        String mark;
        try {
            mark = Files.readString(dir.resolve(MARK), StandardCharsets.US_ASCII).trim();
        } catch (IOException e) {
            return false;
        }
        String[] parts = mark.split(" ");
        if (parts.length != 2) {
            return false;
        }
        long pid;
        try {
            pid = Long.parseLong(parts[0]);
            Long.parseLong(parts[1]);
        } catch (NumberFormatException e) {
            return false;
        }
        if (pid == ProcessHandle.current().pid()) {
            return false;
        }
        Optional<ProcessHandle> owner = ProcessHandle.of(pid);
        return owner.isEmpty() || !owner.get().isAlive() || !identity(owner.get()).equals(mark);
    }

    public static void deleteTree(Path dir) {
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
