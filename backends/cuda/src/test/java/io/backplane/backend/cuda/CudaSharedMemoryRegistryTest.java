package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.DeviceSharedMemory;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The CUDA shared-memory registry against the fake driver (the documented test seam below
 * {@link CudaDriver}): the IPC handle is opened on the device of the register, copies go through
 * the driver, every bound is checked, and each handle is closed exactly once.
 */
class CudaSharedMemoryRegistryTest {
    private FakeCudaDriver driver;
    private CudaSharedMemoryRegistry registry;
    /** "The client process": its context on device 0 (retained for the whole test) and its allocations. */
    private final List<Long> exported = new ArrayList<>();
    private long clientContext;

    @BeforeEach
    void setUp() {
        driver = Fixtures.fake(2);
        Fixtures.usable(driver);
        clientContext = driver.primaryContextRetain(0);
        registry = new CudaSharedMemoryRegistry(driver);
    }

    @AfterEach
    void tearDown() {
        registry.close();
        assertEquals(0, driver.liveIpcMappings(), "an IPC mapping is still open");
        assertEquals(1, driver.retainCount(0) + driver.retainCount(1), "the server still retains a primary context");
        driver.contextPush(clientContext);
        exported.forEach(driver::memFree);
        driver.contextPop();
        driver.primaryContextRelease(0);
        driver.close();
    }

    /** Allocates {@code bytes} on device 0 holding {@code content} and returns its IPC handle, as a client would. */
    static byte[] export(FakeCudaDriver driver, List<Long> exported, long bytes, byte[] content) {
        driver.contextPush(driver.primaryContextRetain(0));
        try {
            long p = driver.memAlloc(bytes);
            MemorySegment.copy(MemorySegment.ofArray(content), 0, driver.deviceMemory(p, content.length), 0, content.length);
            exported.add(p);
            return driver.exportHandle(p);
        } finally {
            driver.contextPop();
            driver.primaryContextRelease(0);
        }
    }

    private byte[] export(long bytes, byte[] content) {
        return export(driver, exported, bytes, content);
    }

    @Test
    void register_status_copyBothWays_unregister() {
        byte[] content = {1, 2, 3, 4, 5, 6, 7, 8};
        registry.register("gpu0", export(64, content), 0, 64);
        assertEquals(List.of(new DeviceSharedMemory.RegionStatus("gpu0", 0, 64)), registry.status(null));
        assertEquals(List.of(new DeviceSharedMemory.RegionStatus("gpu0", 0, 64)), registry.status("gpu0"));
        assertTrue(registry.contains("gpu0"));
        assertEquals(2, driver.retainCount(0), "the register holds the device's primary context (the client holds the other)");

        try (DeviceSharedMemory.Lease in = registry.acquire("gpu0", 2, 4, "input 'x'")) {
            byte[] host = new byte[4];
            in.copyToHost(MemorySegment.ofArray(host));
            assertArrayEquals(new byte[] {3, 4, 5, 6}, host);
        }
        try (DeviceSharedMemory.Lease out = registry.acquire("gpu0", 16, 8, "output 'y'")) {
            out.copyFromHost(MemorySegment.ofArray(new byte[] {9, 9, 9}), 3);
        }
        assertArrayEquals(new byte[] {9, 9, 9, 0}, driver.deviceMemory(exported.get(0) + 16, 4).toArray(ValueLayout.JAVA_BYTE));

        registry.unregister("gpu0");
        assertEquals(1, driver.ipcCloses());
        assertEquals(1, driver.retainCount(0));
        assertEquals(List.of(), registry.status(null));
        BackplaneException e = assertThrows(BackplaneException.class, () -> registry.unregister("gpu0"));
        assertEquals(ErrorCode.NOT_FOUND, e.code());
        assertEquals("Unable to find shared memory region: 'gpu0'", e.getMessage());
        assertEquals(1, driver.ipcCloses(), "a second unregister closes nothing");
    }

    @Test
    void badRegisters_areRefusedNamingTheValue_andLeaveNothingOpen() {
        byte[] h = export(64, new byte[0]);
        assertTrue(assertThrows(BackplaneException.class, () -> registry.register("r", new byte[10], 0, 64)).getMessage()
                .contains("raw_handle is 10 bytes but a cudaIpcMemHandle_t is 64"));
        assertTrue(assertThrows(BackplaneException.class, () -> registry.register("r", h, 0, 0)).getMessage().contains("byte_size 0 must be positive"));
        assertTrue(assertThrows(BackplaneException.class, () -> registry.register("r", h, 5, 64)).getMessage()
                .contains("device_id 5 is not a GPU of this server (it sees 2"));
        byte[] garbage = new byte[64];
        BackplaneException bad = assertThrows(BackplaneException.class, () -> registry.register("r", garbage, 0, 64));
        assertTrue(bad.getMessage().startsWith("failed to open CUDA IPC handle of region 'r' on device 0: ") && bad.getMessage().contains("cuIpcOpenMemHandle_v2"),
                bad.getMessage());
        assertEquals(1, driver.retainCount(0), "a failed open releases the context it retained");
        assertEquals(0, driver.contextDepth());

        registry.register("r", h, 0, 64);
        BackplaneException dup = assertThrows(BackplaneException.class, () -> registry.register("r", h, 0, 64));
        assertEquals("shared memory region 'r' already in manager; unregister it first", dup.getMessage());
        assertEquals(1, driver.ipcOpens());
    }

    @Test
    void acquire_outsideTheRegion_namesOffsetAndSize() {
        registry.register("r", export(64, new byte[0]), 0, 64);
        BackplaneException e = assertThrows(BackplaneException.class, () -> registry.acquire("r", 60, 8, "input 'x'"));
        assertEquals("input 'x': Invalid offset + byte size for shared memory region: 'r' (shared_memory_offset 60 + shared_memory_byte_size 8"
                + " is outside its 64 bytes)", e.getMessage());
        assertThrows(BackplaneException.class, () -> registry.acquire("r", -1, 8, "input 'x'"));
        assertThrows(BackplaneException.class, () -> registry.acquire("r", Long.MAX_VALUE, Long.MAX_VALUE, "input 'x'"));
        assertEquals("output 'y': Unable to find shared memory region: 'nope'",
                assertThrows(BackplaneException.class, () -> registry.acquire("nope", 0, 1, "output 'y'")).getMessage());
        try (DeviceSharedMemory.Lease l = registry.acquire("r", 0, 8, "output 'y'")) {
            assertTrue(assertThrows(BackplaneException.class, () -> l.copyFromHost(MemorySegment.ofArray(new byte[16]), 16)).getMessage()
                    .contains("16 bytes do not fit the slice of 8 bytes of CUDA shared memory region 'r'"));
        }
        registry.unregister("r");
        assertEquals(1, driver.ipcCloses(), "failed acquires gave their reference back");
    }

    @Test
    void unregister_whileLeased_closesWhenTheLastLeaseCloses_once() {
        registry.register("r", export(64, new byte[] {42}), 0, 64);
        DeviceSharedMemory.Lease l = registry.acquire("r", 0, 1, "input 'x'");
        registry.unregister("r");
        assertFalse(registry.contains("r"));
        assertEquals(0, driver.ipcCloses(), "a request in flight keeps the mapping");
        byte[] one = new byte[1];
        l.copyToHost(MemorySegment.ofArray(one));
        assertEquals(42, one[0]);
        l.close();
        l.close();
        assertEquals(1, driver.ipcCloses());
        assertEquals(1, driver.retainCount(0));
    }

    @Test
    void manyThreads_registerAcquireUnregisterAndClose_eachHandleClosedExactlyOnce() throws Exception {
        int regions = 16;
        List<byte[]> handles = new ArrayList<>();
        for (int i = 0; i < regions; i++) {
            handles.add(export(64, new byte[] {(byte) i}));
        }
        int threads = 12;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            for (int round = 0; round < 20; round++) {
                for (int i = 0; i < regions; i++) {
                    registry.register("r" + i, handles.get(i), 0, 64);
                }
                CountDownLatch start = new CountDownLatch(1);
                List<Future<?>> fs = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int me = t;
                    fs.add(pool.submit(() -> {
                        start.await();
                        ThreadLocalRandom rnd = ThreadLocalRandom.current();
                        for (int k = 0; k < 50; k++) {
                            int i = rnd.nextInt(regions);
                            try {
                                switch (rnd.nextInt(me == 0 ? 4 : 3)) {
                                    case 0 -> registry.unregister("r" + i);
                                    case 3 -> registry.unregisterAll();
                                    default -> {
                                        try (DeviceSharedMemory.Lease l = registry.acquire("r" + i, 0, 1, "input")) {
                                            byte[] b = new byte[1];
                                            l.copyToHost(MemorySegment.ofArray(b));
                                            assertEquals(i, b[0]);
                                        }
                                    }
                                }
                            } catch (BackplaneException gone) {
                                assertTrue(gone.getMessage().contains("Unable to find shared memory region: 'r" + i + "'"), gone.getMessage());
                            }
                        }
                        return null;
                    }));
                }
                start.countDown();
                for (Future<?> f : fs) {
                    f.get(60, TimeUnit.SECONDS);
                }
                registry.unregisterAll();
                assertEquals(0, driver.liveIpcMappings(), "round " + round);
                assertEquals((round + 1) * regions, driver.ipcCloses(), "every handle opened is closed exactly once (round " + round + ")");
                assertEquals(driver.ipcOpens(), driver.ipcCloses());
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
    }

    @Test
    void close_unregistersEverything_andRefusesLaterRegisters() {
        registry.register("a", export(64, new byte[0]), 0, 64);
        registry.register("b", export(64, new byte[0]), 0, 32);
        registry.close();
        registry.close();
        assertEquals(2, driver.ipcCloses());
        assertEquals(ErrorCode.UNAVAILABLE, assertThrows(BackplaneException.class, () -> registry.register("c", new byte[64], 0, 1)).code());
    }

    @Test
    void unavailable_isNotAvailable_andHoldsNothing() {
        DeviceSharedMemory none = DeviceSharedMemory.unavailable();
        assertFalse(none.available());
        assertFalse(none.contains("x"));
        // as Triton built without GPUs: no region, a named one not found, unregister has nothing to do; a register is refused
        assertEquals(java.util.List.of(), none.status(null));
        assertEquals(ErrorCode.NOT_FOUND, assertThrows(BackplaneException.class, () -> none.status("x")).code());
        none.unregister("x");
        none.unregisterAll();
        assertEquals(ErrorCode.UNSUPPORTED, assertThrows(BackplaneException.class, () -> none.register("x", new byte[64], 0, 1)).code());
    }
}
