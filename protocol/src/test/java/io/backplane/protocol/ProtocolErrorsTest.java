package io.backplane.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

class ProtocolErrorsTest {
    @Test
    void classify_backplaneException_asItIs_throughFutureWrappers() {
        BackplaneException notFound = BackplaneException.notFound("no model 'm'");
        assertSame(notFound, ProtocolErrors.classify(new CompletionException(new ExecutionException(notFound))));
        assertFalse(ProtocolErrors.isUnexpected(new CompletionException(notFound)));
    }

    @Test
    void classify_cancelledFuture_cancelled() {
        BackplaneException e = ProtocolErrors.classify(new CompletionException(new CancellationException()));
        assertEquals(ErrorCode.CANCELLED, e.code());
        assertEquals("the request was cancelled", e.getMessage());
        assertEquals(499, e.code().httpStatus());
        assertEquals("CANCELLED", e.code().grpcStatus());
    }

    @Test
    void classify_badValue_invalidArgumentWithItsMessage() {
        BackplaneException e = ProtocolErrors.classify(new ArithmeticException("long overflow"));
        assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        assertEquals("long overflow", e.getMessage());
        assertEquals(ErrorCode.INVALID_ARGUMENT, ProtocolErrors.classify(new IllegalArgumentException("bad shape")).code());
    }

    @Test
    void classify_anythingElse_internal_unexpected_keepsTheCause() {
        IllegalStateException bug = new IllegalStateException("boom");
        BackplaneException e = ProtocolErrors.classify(bug);
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("boom"), e.getMessage());
        assertSame(bug, e.getCause());
        assertTrue(ProtocolErrors.isUnexpected(new CompletionException(bug)));
    }
}
