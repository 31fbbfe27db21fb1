package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A backend closing while a stub's clean-up still runs (a bounded shutdown moved on) unlinks that
 * stub's shared-memory files itself; the region's own close later finds nothing left to remove.
 * And the owner marks of temporary folders: a live owner's folder is never reaped, a dead one's is.
 */
class SharedRegionOwnerTest {
    @TempDir
    Path dir;

    private static List<String> files(String prefix) throws Exception {
        try (var s = Files.list(SharedRegion.SHM_DIR)) {
            return s.map(p -> p.getFileName().toString()).filter(n -> n.startsWith(prefix + "-")).toList();
        }
    }

    @Test
    void unlinkAll_removesTheFilesOfOpenRegionsOfThatOwnerOnly_closeAfterwardsIsFine() throws Exception {
        Path owner = dir.resolve("a");
        Path other = dir.resolve("b");
        SharedRegion closedEarly = SharedRegion.create(2, 1 << 16, 1 << 20, owner);
        closedEarly.close();
        try (SharedRegion mine = SharedRegion.create(1, 1 << 16, 1 << 20, owner);
                SharedRegion theirs = SharedRegion.create(1, 1 << 16, 1 << 20, other)) {
            assertFalse(files(mine.prefix()).isEmpty());
            assertEquals(1, SharedRegion.unlinkAll(owner), "only the region still open is unlinked");
            assertEquals(List.of(), files(mine.prefix()));
            assertFalse(files(theirs.prefix()).isEmpty(), "another owner's region is untouched");
            assertEquals(0, SharedRegion.unlinkAll(owner));
        }
        assertEquals(0, SharedRegion.unlinkAll(other), "a closed region is no longer tracked");
    }

    @Test
    void ownedDirectory_liveOwnerKept_deadOwnerReaped_unmarkedKept() throws Exception {
        Path mine = OwnedDirectory.create(dir, "bp-test-");
        Path dead = Files.createDirectories(dir.resolve("bp-test-dead"));
        Process p = new ProcessBuilder("true").start();
        p.waitFor();
        Files.writeString(dead.resolve(OwnedDirectory.MARK), p.pid() + " 1");
        Path reused = Files.createDirectories(dir.resolve("bp-test-reused"));
        Files.writeString(reused.resolve(OwnedDirectory.MARK), ProcessHandle.current().parent().orElseThrow().pid() + " 1"); // live pid, other start time
        Path unmarked = Files.createDirectories(dir.resolve("bp-test-unmarked"));
        List<Path> reaped = OwnedDirectory.reapStale(dir, "bp-test-");
        assertTrue(Files.isDirectory(mine), "this process's folder is kept");
        assertTrue(Files.isDirectory(unmarked), "a folder without a mark (maybe being created) is kept");
        assertFalse(Files.exists(dead), "a dead owner's folder is reaped");
        assertFalse(Files.exists(reused), "a folder whose pid now belongs to another process is reaped");
        assertEquals(2, reaped.size(), reaped.toString());
    }
}
