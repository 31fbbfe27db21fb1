package io.backplane.spi;

import static java.util.Objects.requireNonNull;

import java.io.Serial;
import org.jspecify.annotations.Nullable;

/**
 * The one exception type of Backplane. It carries an {@link ErrorCode} and a message that says
 * what was wrong, with the offending value, and what to do.
 *
 * <p>Backends may throw it from any SPI method; the core keeps its code. Any other
 * {@link Throwable} thrown by a backend becomes {@link ErrorCode#INTERNAL}.
 */
public class BackplaneException extends RuntimeException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

    public BackplaneException(ErrorCode code, String message) {
        super(requireNonNull(message, "message is null"));
        this.code = requireNonNull(code, "code is null");
    }

    public BackplaneException(ErrorCode code, String message, @Nullable Throwable cause) {
        super(requireNonNull(message, "message is null"), cause);
        this.code = requireNonNull(code, "code is null");
    }

    /** The category of this error; never null. */
    public ErrorCode code() {
        return code;
    }

    /**
     * Returns {@code t} itself when it is a {@code BackplaneException}, else wraps it as
     * {@link ErrorCode#INTERNAL} with {@code context} and the cause's own message.
     */
    public static BackplaneException wrap(Throwable t, String context) {
        if (t instanceof BackplaneException e) {
            return e;
        }
        String detail = t.getMessage() == null ? t.getClass().getName() : t.getClass().getSimpleName() + ": " + t.getMessage();
        return new BackplaneException(ErrorCode.INTERNAL, context + ": " + detail, t);
    }

    public static BackplaneException invalid(String message) {
        return new BackplaneException(ErrorCode.INVALID_ARGUMENT, message);
    }

    public static BackplaneException notFound(String message) {
        return new BackplaneException(ErrorCode.NOT_FOUND, message);
    }

    public static BackplaneException unavailable(String message) {
        return new BackplaneException(ErrorCode.UNAVAILABLE, message);
    }

    public static BackplaneException internal(String message) {
        return new BackplaneException(ErrorCode.INTERNAL, message);
    }
}
