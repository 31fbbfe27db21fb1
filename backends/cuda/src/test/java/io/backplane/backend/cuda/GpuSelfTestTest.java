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

    @Test
    void run_unknownArgument_isRejected() {
        assertThrows(IllegalArgumentException.class, () -> newSelfTest().run(new String[] {"--gpus", "all"}));
    }
}
