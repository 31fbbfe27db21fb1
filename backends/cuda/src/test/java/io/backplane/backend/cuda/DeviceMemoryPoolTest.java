package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class DeviceMemoryPoolTest {
    private FakeCudaDriver driver;
    private DeviceContext device;

    @BeforeEach
    void start() {
        driver = Fixtures.fake(1);
        driver.init();
        device = new DeviceContext(driver, 0, 10_000);
    }

    @AfterEach
    void stop() {
        device.close();
        assertEquals(0, driver.liveDeviceAllocations());
        assertEquals(0, driver.livePinned());
        assertEquals(0, driver.retainCount(0));
        driver.close();
    }

    @Test
    void allocate_andClose_areCountedOnce_evenWhenClosedTwice() {
        DeviceMemoryPool pool = device.pool();
        DeviceMemoryPool.DeviceBuffer a = pool.allocate(1000, "a");
        DeviceMemoryPool.PinnedBuffer p = pool.allocatePinned(300, "a");
        assertEquals(new DeviceMemoryPool.Stats(1000, 1000, 300, 2, 2, 0), pool.stats());
        a.close();
        a.close(); // the fake driver would throw on a second cuMemFree of the same pointer
        p.close();
        p.close();
        assertEquals(new DeviceMemoryPool.Stats(0, 1000, 0, 0, 2, 2), pool.stats());
        assertEquals(0, driver.liveDeviceAllocations());
    }

    @Test
    void allocate_overTheLimit_isResourceExhausted_andChangesNothing() {
        DeviceMemoryPool pool = device.pool();
        DeviceMemoryPool.DeviceBuffer a = pool.allocate(8000, "m1");
        BackplaneException e = assertThrows(BackplaneException.class, () -> pool.allocate(3000, "m2"));
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
        assertTrue(e.getMessage().contains("m2 needs 3000 bytes on GPU 0") && e.getMessage().contains("8000 bytes are in use"), e.getMessage());
        assertEquals(8000, pool.stats().deviceBytes());
        assertEquals(1, driver.liveDeviceAllocations());
        a.close();
    }

    @Test
    void allocate_driverOutOfMemory_rollsBackTheAccounting() {
        driver.failNext("cuMemAlloc_v2", 2);
        CudaException e = assertThrows(CudaException.class, () -> device.pool().allocate(100, "m"));
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
        assertEquals(0, device.pool().stats().deviceBytes());
    }

    @Test
    void closeAll_freesWhatOwnersLeaked() {
        device.pool().allocate(100, "leaky");
        device.pool().allocatePinned(100, "leaky");
        device.pool().closeAll();
        assertEquals(0, driver.liveDeviceAllocations());
        assertEquals(0, driver.livePinned());
        assertEquals(0, device.pool().stats().liveBuffers());
    }

    @Test
    void afterContextReset_closingOldBuffers_neverFreesDeadPointers() {
        DeviceMemoryPool.DeviceBuffer old = device.pool().allocate(100, "m");
        driver.failNext("cuLaunchKernel", 700);
        device.markFaulted(CudaErrors.exception("cuLaunchKernel", 700));
        device.recoverIfFaulted(); // resets the context: the driver drops every allocation
        assertEquals(0, driver.liveDeviceAllocations());
        old.close(); // would fail in the driver if it were freed again
        assertEquals(0, device.pool().stats().deviceBytes());
        assertEquals(1, device.generation());
    }
}
