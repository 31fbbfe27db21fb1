package io.backplane.plugin.http;

import io.backplane.protocol.ProtocolErrors;
import io.backplane.spi.BackplaneException;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How every REST failure becomes an answer: a wrong method is 405, anything else is its
 * {@link ProtocolErrors category}'s HTTP status, always {@code {"error": "..."}} with the message
 * that names the bad value. Only an unexpected failure (a bug, not bad input) is logged, at warn.
 */
final class RestErrors {
    private static final Logger log = LoggerFactory.getLogger(RestErrors.class);

    private RestErrors() {
    }

    static void requireMethod(HttpMethod actual, HttpMethod expected, String path) {
        if (!actual.equals(expected)) {
            throw new MethodNotAllowed(path + " accepts " + expected + ", not " + actual);
        }
    }

    static BackplaneException notFound(String path) {
        return BackplaneException.notFound("no endpoint at '" + path + "'; see /v2, /v2/health/{live,ready}, /v2/models/{model}[/versions/{v}][/ready|/config|/stats|/infer|/generate|/generate_stream], /v2/repository/...");
    }

    private static final class MethodNotAllowed extends RuntimeException {
        @java.io.Serial
        private static final long serialVersionUID = 1L;

        MethodNotAllowed(String message) {
            super(message);
        }
    }

    /** The error answer for {@code t}: its {@link ProtocolErrors category}'s HTTP status and message. */
    static FullHttpResponse errorResponse(Throwable t, boolean keepAlive) {
        if (ProtocolErrors.unwrap(t) instanceof MethodNotAllowed m) {
            return Responses.error(HttpResponseStatus.METHOD_NOT_ALLOWED, String.valueOf(m.getMessage()), keepAlive);
        }
        if (ProtocolErrors.isUnexpected(t)) {
            log.warn("internal error serving an http request", ProtocolErrors.unwrap(t));
        }
        BackplaneException b = ProtocolErrors.classify(t);
        return Responses.error(HttpResponseStatus.valueOf(b.code().httpStatus()), String.valueOf(b.getMessage()), keepAlive);
    }
}
