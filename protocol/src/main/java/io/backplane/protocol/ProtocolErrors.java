package io.backplane.protocol;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * One answer for every failure a frontend reports: the failure becomes a
 * {@link BackplaneException} whose {@link ErrorCode} names the HTTP status
 * ({@link ErrorCode#httpStatus()}) and the gRPC status ({@link ErrorCode#grpcStatus()}), so REST
 * and gRPC clients see the same category and message for the same failure.
 */
public final class ProtocolErrors {
    private ProtocolErrors() {
    }

    /** {@code t} without the {@link CompletionException} and {@link ExecutionException} wrappers of futures. */
    public static Throwable unwrap(Throwable t) {
        Throwable e = requireNonNull(t, "t is null");
        while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    /**
     * The error to report for {@code t}: a {@link BackplaneException} as it is; a cancelled future
     * as CANCELLED; an {@link IllegalArgumentException} or {@link ArithmeticException} (a bad value
     * the request carried, e.g. a shape whose element count overflows) as INVALID_ARGUMENT with its
     * message; anything else as INTERNAL with {@code t} as the cause, which {@link #isUnexpected}
     * tells the caller to log.
     */
    public static BackplaneException classify(Throwable t) {
        Throwable e = unwrap(t);
        return switch (e) {
            case BackplaneException b -> b;
            case CancellationException c -> new BackplaneException(ErrorCode.CANCELLED, "the request was cancelled", c);
            case IllegalArgumentException i -> new BackplaneException(ErrorCode.INVALID_ARGUMENT, String.valueOf(i.getMessage()), i);
            case ArithmeticException a -> new BackplaneException(ErrorCode.INVALID_ARGUMENT, String.valueOf(a.getMessage()), a);
            default -> new BackplaneException(ErrorCode.INTERNAL, "internal error: " + e, e);
        };
    }

    /** Whether {@code t} is a failure no request explains (a bug): {@link #classify} makes it INTERNAL. */
    public static boolean isUnexpected(Throwable t) {
        Throwable e = unwrap(t);
        return !(e instanceof BackplaneException) && classify(e).code() == ErrorCode.INTERNAL;
    }
}
