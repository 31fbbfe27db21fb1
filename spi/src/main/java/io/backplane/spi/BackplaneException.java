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
 *
 * <p>The message reaches clients (load responses, model status, inference errors), so it names
 * files, lines and values but never quotes what a file holds: a config line, a Python traceback
 * with its source lines, a child process's output. Such text goes in the {@link #logDetail()},
 * which the host writes to its own log beside the message and never sends to a client.
 */
public class BackplaneException extends RuntimeException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;
    private final @Nullable String logDetail;

    public BackplaneException(ErrorCode code, String message) {
        this(code, message, null, null);
    }

    public BackplaneException(ErrorCode code, String message, @Nullable Throwable cause) {
        this(code, message, null, cause);
    }

    /**
     * @param logDetail what only the host's log may show (a traceback, the file line at fault, a
     *     child's output); null for none
     * @since SPI 5
     */
    public BackplaneException(ErrorCode code, String message, @Nullable String logDetail, @Nullable Throwable cause) {
        super(requireNonNull(message, "message is null"), cause);
        this.code = requireNonNull(code, "code is null");
        this.logDetail = logDetail == null || logDetail.isBlank() ? null : logDetail;
    }

    /** The category of this error; never null. */
    public ErrorCode code() {
        return code;
    }

    /**
     * What the host logs after the message and never sends to a client: a traceback, the config
     * line at fault, a child's output; null when there is none.
     *
     * @since SPI 5
     */
    public @Nullable String logDetail() {
        return logDetail;
    }

    /** The message, then the {@link #logDetail()} on the next lines when there is one: for the host's log only. */
    public String forLog() {
        return logDetail == null ? getMessage() : getMessage() + "\n" + logDetail;
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
