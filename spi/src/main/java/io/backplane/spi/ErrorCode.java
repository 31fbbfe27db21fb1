package io.backplane.spi;

/**
 * The category of a {@link BackplaneException}. Each category maps to one HTTP status and one
 * gRPC status so that every transport reports the same class of error for the same failure; the
 * table (and how Triton's codes map onto it) is in docs/protocols.md. New codes are added at the
 * end: the python backend's wire carries the ordinal.
 */
public enum ErrorCode {
    /** The request or configuration is wrong; retrying the same input fails again. */
    INVALID_ARGUMENT(400, "INVALID_ARGUMENT"),
    /** The model, version, tensor or resource named does not exist. */
    NOT_FOUND(404, "NOT_FOUND"),
    /** The model cannot serve now (loading, unloading, no ready instance); a retry may work. */
    UNAVAILABLE(503, "UNAVAILABLE"),
    /** A queue or memory limit was reached; the request was rejected at once. */
    RESOURCE_EXHAUSTED(503, "RESOURCE_EXHAUSTED"),
    /** The request was cancelled by its caller or by the host. */
    CANCELLED(499, "CANCELLED"),
    /** The request's timeout passed before it completed. */
    DEADLINE_EXCEEDED(504, "DEADLINE_EXCEEDED"),
    /** The request asked for something this model or backend does not support (HTTP 501 as Triton answers). */
    UNSUPPORTED(501, "UNIMPLEMENTED"),
    /** A payload exceeded a configured size limit. */
    TOO_LARGE(413, "RESOURCE_EXHAUSTED"),
    /** A bug or an unexpected failure inside Backplane or a backend. */
    INTERNAL(500, "INTERNAL"),
    /** A failure of no known category (Triton's UNKNOWN, e.g. a Python model's {@code TritonError.UNKNOWN}). */
    UNKNOWN(400, "UNKNOWN"),
    /** What the request would create exists already (Triton's ALREADY_EXISTS). */
    ALREADY_EXISTS(400, "ALREADY_EXISTS");

    private final int httpStatus;
    private final String grpcStatus;

    ErrorCode(int httpStatus, String grpcStatus) {
        this.httpStatus = httpStatus;
        this.grpcStatus = grpcStatus;
    }

    /** The HTTP status a REST frontend must answer with for this category. */
    public int httpStatus() {
        return httpStatus;
    }

    /** The name of the {@code io.grpc.Status.Code} a gRPC frontend must answer with. */
    public String grpcStatus() {
        return grpcStatus;
    }
}
