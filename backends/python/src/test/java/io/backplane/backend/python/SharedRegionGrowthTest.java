package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How a host region grows: by doubling its last chunk by default, by multiples of Triton's
 * {@code shm-growth-byte-size} when it is set, never past {@code shm_max_bytes} (Triton's sentence,
 * the sizes, the key to raise); every chunk's pages are really held by the file system (so a full
 * {@code /dev/shm} answers at growth, not with SIGBUS later), and nothing is left after close.
 */
class SharedRegionGrowthTest {
    @TempDir
    Path owner;

    private static List<Path> files(String prefix) throws Exception {
        try (var s = Files.list(SharedRegion.SHM_DIR)) {
            return s.filter(p -> p.getFileName().toString().startsWith(prefix + "-")).toList();
        }
    }

    /** The bytes the file system holds for {@code p} (stat's blocks; Java has no attribute for them). */
    private static long heldBytes(Path p) throws Exception {
        Process stat = new ProcessBuilder("stat", "-c", "%b %B", p.toString()).redirectErrorStream(true).start();
        String out = new String(stat.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).strip();
        assertEquals(0, stat.waitFor(), out);
        String[] f = out.split(" ");
        return Long.parseLong(f[0]) * Long.parseLong(f[1]);
    }

    @Test
    void growth_tritonsStep_roundsTheRequestUpToItsMultiple_chunksFullyAllocated() throws Exception {
        String prefix;
        try (SharedRegion r = SharedRegion.create(1, 1 << 16, 64L << 20, 1 << 20, owner)) {
            prefix = r.prefix();
            r.allocate((1 << 20) + (1 << 19)); // 1.5 MiB: a chunk of 2 MiB
            assertEquals((1L << 16) + (2L << 20), r.totalBytes());
            r.allocate(1 << 18); // fits in what is left of that chunk
            assertEquals((1L << 16) + (2L << 20), r.totalBytes());
            for (Path p : files(prefix)) {
                long held = heldBytes(p);
                assertTrue(held >= Files.size(p), p + " is sparse: the file system holds " + held + " of its " + Files.size(p) + " bytes");
            }
        }
        assertEquals(List.of(), files(prefix));
    }

    @Test
    void growth_default_doublesTheLastChunk_andStopsAtTheLimitWithTritonsSentence() throws Exception {
        String prefix;
        try (SharedRegion r = SharedRegion.create(1, 1 << 16, 1 << 20, owner)) {
            prefix = r.prefix();
            r.allocate(1 << 16);
            assertEquals(3L << 16, r.totalBytes(), "the second chunk doubles the first");
            BackplaneException e = assertThrows(BackplaneException.class, () -> r.allocate(1 << 20));
            assertTrue(e.getMessage().startsWith("Failed to increase the shared memory pool size for key '" + prefix + "' to "), e.getMessage());
            assertTrue(e.getMessage().contains("of at most " + (1 << 20) + " bytes") && e.getMessage().contains("raise '" + StubSettings.SHM_MAX + "'"),
                    e.getMessage());
            r.allocate(1 << 10); // still serves
        }
        assertEquals(List.of(), files(prefix));
    }
}
