package io.backplane.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SystemSharedMemoryTest {
    @TempDir
    Path root;

    @Test
    void unregister_whileALeaseIsOpen_mappingStaysUntilTheLeaseCloses() throws Exception {
        Files.write(root.resolve("obj"), new byte[] {7, 8, 9, 10});
        try (SystemSharedMemory shm = new SystemSharedMemory(root)) {
            shm.register("r", "/obj", 1, 3);
            SystemSharedMemory.Lease lease = shm.acquire("r", 1, 2, "input 'x'");
            shm.unregister("r");
            assertEquals(0, shm.status(null).size());
            assertEquals(9, lease.segment().get(ValueLayout.JAVA_BYTE, 0));
            assertTrue(lease.segment().scope().isAlive());
            lease.close();
            lease.close();
            assertFalse(lease.segment().scope().isAlive());
        }
    }

    @Test
    void close_withRegions_unmapsThemAndRefusesNewOnes() throws Exception {
        Files.write(root.resolve("obj"), new byte[8]);
        SystemSharedMemory shm = new SystemSharedMemory(root);
        shm.register("r", "obj", 0, 8);
        SystemSharedMemory.Lease lease = shm.acquire("r", 0, 8, "input 'x'");
        lease.close();
        shm.close();
        assertFalse(lease.segment().scope().isAlive());
        BackplaneException e = assertThrows(BackplaneException.class, () -> shm.register("s", "obj", 0, 8));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
    }

    @Test
    void register_aLinkOrADuplicate_refused() throws Exception {
        Files.write(root.resolve("obj"), new byte[8]);
        Files.createSymbolicLink(root.resolve("link"), root.resolve("obj"));
        try (SystemSharedMemory shm = new SystemSharedMemory(root)) {
            BackplaneException link = assertThrows(BackplaneException.class, () -> shm.register("r", "/link", 0, 8));
            assertTrue(link.getMessage().contains("a link"), link.getMessage());
            shm.register("r", "/obj", 0, 8);
            BackplaneException dup = assertThrows(BackplaneException.class, () -> shm.register("r", "/obj", 0, 8));
            assertTrue(dup.getMessage().contains("already registered"), dup.getMessage());
        }
    }
}
