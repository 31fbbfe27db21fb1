package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** What CI can check of the GPU self-test: without a driver it stops with status 2 after saying what is missing. */
class GpuSelfTestTest {
    private static GpuSelfTest newSelfTest() {
        return new GpuSelfTest();
    }

    @Test
    void run_withoutDriver_exitsWithStatus2() throws Exception {
        int status = newSelfTest().run(new String[] {"--model-dir", Fixtures.SAMPLE.toString(), "--library", "libcuda-not-here.so.1"});
        assertEquals(2, status);
    }

    /** The whole self-test flow against the in-memory driver: every check must pass before a GPU ever sees it. */
    @Test
    void run_onFakeDriver_everyCheckPasses() throws Exception {
        try (FakeCudaDriver driver = Fixtures.fake(1)) {
            int status = newSelfTest().run(new String[] {"--model-dir", Fixtures.SAMPLE.toString(), "--quick"}, Fixtures.usable(driver));
            assertEquals(0, status);
            assertEquals(0, driver.retainCount(0), "the self-test released every context it retained");
            assertEquals(0, driver.liveDeviceAllocations());
            assertEquals(0, driver.livePinned());
            assertEquals(3, driver.ipcOpens(), "the CUDA shared-memory step registered X, Y and OUT");
            assertEquals(0, driver.liveIpcMappings(), "and every mapping was closed");
        }
    }

    /** The GPU run starts the IPC client as a child JVM: the command line works (without libcuda the child says so and exits 2). */
    @Test
    void childClient_startsInItsOwnJvm_andReportsAMissingDriver() throws Exception {
        GpuSelfTest selfTest = newSelfTest();
        selfTest.run(new String[] {"--model-dir", Fixtures.SAMPLE.toString(), "--library", "libcuda-not-here.so.1"});
        assertEquals(2, selfTest.childClient("http://127.0.0.1:9", "127.0.0.1:9"));
    }

    @Test
    void run_faultTestOnFakeDriver_seesTheFaultAndTheRecovery() throws Exception {
        try (FakeCudaDriver driver = Fixtures.fake(1)) {
            int status = newSelfTest().run(new String[] {"--model-dir", Fixtures.SAMPLE.toString(), "--fault-test"}, Fixtures.usable(driver));
            assertEquals(0, status);
            assertEquals(0, driver.retainCount(0));
        }
    }

    @Test
    void run_unknownArgument_isRejected() {
        assertThrows(IllegalArgumentException.class, () -> newSelfTest().run(new String[] {"--gpus", "all"}));
    }
}
