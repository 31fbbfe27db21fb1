package io.backplane.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.host.LogControl;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/** The logging extension's control over the real Logback binding: Backplane's loggers change level at run time. */
class LogbackControlTest {
    @Test
    void update_verboseThenWarningsOnly_changesBackplaneLoggers_andRefusesWhatALevelCannotSay() {
        LogbackControl control = LogbackControl.detect();
        assertNotNull(control, "logback is the binding of the server's tests");
        LogControl.Settings before = control.settings();
        try {
            LogControl.Settings verbose = control.update(new LogControl.Settings("", true, true, true, 1, "default"));
            assertEquals(1, verbose.verboseLevel());
            assertTrue(LoggerFactory.getLogger("io.backplane.core.Anything").isDebugEnabled());
            assertFalse(LoggerFactory.getLogger("io.backplane.core.Anything").isTraceEnabled());

            LogControl.Settings quiet = control.update(new LogControl.Settings("", false, true, true, 0, "default"));
            assertEquals(new LogControl.Settings("", false, true, true, 0, "default"), quiet);
            assertFalse(LoggerFactory.getLogger("io.backplane.core.Anything").isInfoEnabled());
            assertTrue(LoggerFactory.getLogger("io.backplane.core.Anything").isWarnEnabled());

            BackplaneException gap = assertThrows(BackplaneException.class,
                    () -> control.update(new LogControl.Settings("", true, false, true, 0, "default")));
            assertEquals(ErrorCode.INVALID_ARGUMENT, gap.code());
            assertTrue(gap.getMessage().contains("log_warning"), gap.getMessage());
            BackplaneException file = assertThrows(BackplaneException.class,
                    () -> control.update(new LogControl.Settings("/tmp/x.log", true, true, true, 0, "default")));
            assertEquals(ErrorCode.UNSUPPORTED, file.code());
            assertTrue(file.getMessage().contains("/tmp/x.log"), file.getMessage());
            assertEquals(quiet, control.settings(), "a refused update changes nothing");
        } finally {
            control.update(before);
        }
        assertEquals(before, control.settings());
    }
}
