package io.backplane.server;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The private temporary folder of a server JVM. {@code bin/backplane} makes
 * {@code <tmp>/backplane-jvm-<pid>-XXXXXX} (its own pid, which the JVM keeps: the launcher execs it)
 * and starts the JVM with {@code java.io.tmpdir} pointed at it and {@value #OWNED_PROPERTY}{@code =true},
 * so that whatever the JVM or a plugin writes there — the host's work folder, and the files native
 * libraries unpack and leave to {@link java.io.File#deleteOnExit()} (onnxruntime's
 * {@code onnxruntime-java*} folder, xgboost4j's {@code libxgboost4j*.so}) — goes with the folder,
 * which {@link #removeClaimed()} deletes on every exit path, including the signal stop whose
 * {@link Runtime#halt} skips the JVM's own delete-on-exit. A folder left by a JVM that could not
 * remove it (SIGKILL, a crash) is reaped by the next server that starts in the same parent folder.
 *
 * <p>Only {@link Main#main} claims the folder: a server embedded in an application, or run by
 * tests, never has its JVM's temporary folder removed or changed.
 */
final class JvmTemporaryFolder {
    private static final Logger log = LoggerFactory.getLogger(JvmTemporaryFolder.class);
    /** Set by {@code bin/backplane} when {@code java.io.tmpdir} is a folder it made for this JVM alone. */
    static final String OWNED_PROPERTY = "backplane.tmpdir.owned";
    static final String PREFIX = "backplane-jvm-";
    /** The owner mark, in the format of the core's owned folders: {@code "<pid> <start epoch millis>"}. */
    static final String MARK = ".backplane-owner";
    private static final Pattern NAME = Pattern.compile(Pattern.quote(PREFIX) + "(\\d+)-.*");
    private static final AtomicReference<@Nullable Path> CLAIMED = new AtomicReference<>();

    private JvmTemporaryFolder() {
    }

    /**
     * When the launcher made {@code java.io.tmpdir} for this JVM: marks it as this process's,
     * reaps the folders of dead server JVMs beside it, and remembers it for {@link #removeClaimed()}.
     * Returns the folder, or null when there is none to own.
     */
    static @Nullable Path claim() {
        if (!Boolean.getBoolean(OWNED_PROPERTY)) {
            return null;
        }
        Path dir = Path.of(System.getProperty("java.io.tmpdir")).toAbsolutePath().normalize();
        if (!Files.isDirectory(dir) || dir.getFileName() == null || !dir.getFileName().toString().startsWith(PREFIX)) {
            log.warn("-D{}=true, but java.io.tmpdir {} is not a {}* folder; it is left as it is", OWNED_PROPERTY, dir, PREFIX);
            return null;
        }
        try {
            Files.writeString(dir.resolve(MARK), identity(ProcessHandle.current()), StandardCharsets.US_ASCII);
        } catch (IOException e) {
            log.warn("cannot mark the temporary folder {} as this server's: {}", dir, e.getMessage());
        }
        CLAIMED.set(dir);
        Path parent = dir.getParent();
        if (parent != null) {
            List<Path> reaped = reapStale(parent);
            if (!reaped.isEmpty()) {
                log.info("removed {} temporary folder(s) left by dead servers: {}", reaped.size(), reaped);
            }
        }
        return dir;
    }

    /** The claimed folder, or null. */
    static @Nullable Path claimed() {
        return CLAIMED.get();
    }

    /**
     * Deletes the claimed folder and everything in it; idempotent, never throws. Call it last:
     * nothing of the JVM's may use it after. Synchronized, and the folder forgotten only once it is
     * gone: a caller that comes second (the shutdown hook about to halt, while the main thread
     * removes it) returns only when the removal is complete.
     */
    static synchronized void removeClaimed() {
        Path dir = CLAIMED.get();
        if (dir != null) {
            // A plugin's clean-up still running (a stub's, abandoned at its deadline) may add or remove an entry while the
            // tree is walked, which leaves a folder behind: walk again until it is gone, a few times at most.
            for (int attempt = 0; attempt < REMOVE_ATTEMPTS && Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS); attempt++) {
                deleteTree(dir);
            }
            if (Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                log.warn("could not remove the temporary folder {}; the next server start removes it", dir);
            }
            CLAIMED.set(null);
        }
    }

    /** Walks of the folder {@link #removeClaimed} tries before it gives up. */
    private static final int REMOVE_ATTEMPTS = 5;

    static String identity(ProcessHandle p) {
        return p.pid() + " " + p.info().startInstant().map(Instant::toEpochMilli).orElse(-1L);
    }

    /**
     * Removes the {@value #PREFIX}* folders of {@code parent} whose owner is dead: by the owner mark,
     * or, for a folder not marked yet (its JVM died while starting), by the pid in its name.
     */
    static List<Path> reapStale(Path parent) {
        List<Path> removed = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(parent, PREFIX + "*")) {
            for (Path dir : ds) {
                if (Files.isDirectory(dir) && ownerIsDead(dir)) {
                    deleteTree(dir);
                    removed.add(dir);
                }
            }
        } catch (IOException | RuntimeException e) {
            log.debug("cannot scan {} for stale {}* folders", parent, PREFIX, e);
        }
        return removed;
    }

    static boolean ownerIsDead(Path dir) {
        String mark;
        try {
            mark = Files.readString(dir.resolve(MARK), StandardCharsets.US_ASCII).trim();
        } catch (IOException e) {
            Matcher m = NAME.matcher(dir.getFileName().toString());
            if (!m.matches()) {
                return false;
            }
            try {
                // the launcher that made it is (or execs into) that pid: while it runs, the folder is its
                return ProcessHandle.of(Long.parseLong(m.group(1))).map(h -> !h.isAlive()).orElse(true);
            } catch (NumberFormatException nfe) {
                return false;
            }
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

    private static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    log.debug("cannot delete {}", p, e);
                }
            });
        } catch (IOException | RuntimeException e) {
            log.debug("cannot delete {}", dir, e);
        }
    }
}
