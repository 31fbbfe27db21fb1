package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.backplane.protocol.ProtocolErrors;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import org.jspecify.annotations.Nullable;

/**
 * An error as OpenAI reports it: an HTTP status and the body
 * {@code {"error": {"message", "type", "param", "code"}}}, which OpenAI's clients turn into their
 * exception types by status (400 {@code BadRequestError}, 401 {@code AuthenticationError}, 404
 * {@code NotFoundError}, ...). Immutable.
 *
 * @param status the HTTP status
 * @param message what went wrong and what to do
 * @param type OpenAI's error type ({@code invalid_request_error}, {@code authentication_error}, {@code server_error}, ...)
 * @param param the request field at fault, or null
 * @param code OpenAI's error code ({@code model_not_found}, {@code invalid_api_key}, ...), or null
 */
record ApiError(int status, String message, String type, @Nullable String param, @Nullable String code) {
    ApiError {
        requireNonNull(message, "message is null");
        requireNonNull(type, "type is null");
    }

    /** A bad request field: 400. */
    static ApiError invalid(String message, @Nullable String param) {
        return new ApiError(400, message, "invalid_request_error", param, null);
    }

    static ApiError modelNotFound(String model) {
        return new ApiError(404, "The model '" + model + "' does not exist or is not loaded; GET /v1/models lists the models served",
                "invalid_request_error", "model", "model_not_found");
    }

    /** An error of the host (a model's, the queue's, an unload's) with the status its code maps to. */
    static ApiError of(Throwable t) {
        BackplaneException e = ProtocolErrors.classify(t);
        int status = e.code().httpStatus();
        if (e.code() == ErrorCode.CANCELLED) {
            status = 499;
        } else if (e.code() == ErrorCode.UNSUPPORTED) {
            status = 400; // not 501: OpenAI's clients retry 5xx, and asking again changes nothing
        }
        String type = switch (e.code()) {
            case INVALID_ARGUMENT, UNKNOWN, ALREADY_EXISTS, NOT_FOUND -> "invalid_request_error";
            case TOO_LARGE -> "invalid_request_error";
            case UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED -> "service_unavailable_error";
            case UNSUPPORTED -> "invalid_request_error";
            default -> "server_error";
        };
        return new ApiError(status, String.valueOf(e.getMessage()), type, null, e.code() == ErrorCode.NOT_FOUND ? "not_found" : null);
    }

    /** The body: {@code {"error": {...}}}. */
    ObjectNode body() {
        ObjectNode root = Json.MAPPER.createObjectNode();
        ObjectNode err = root.putObject("error");
        err.put("message", message);
        err.put("type", type);
        if (param == null) {
            err.putNull("param");
        } else {
            err.put("param", param);
        }
        if (code == null) {
            err.putNull("code");
        } else {
            err.put("code", code);
        }
        return root;
    }

    /** Thrown while a request is read, to answer it with this error. */
    static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;
        private final transient ApiError error;

        Failure(ApiError error) {
            super(error.message(), null, false, false);
            this.error = error;
        }

        ApiError error() {
            return error;
        }
    }

    Failure failure() {
        return new Failure(this);
    }
}
