package io.backplane.plugin.http;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.InferenceRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.buffer.ByteBuf;
import java.util.List;

/**
 * One REST request as the router decoded it, handed to a {@link RestRoute}. The request (and its
 * body) is valid only until {@code serve} returns: a route that answers later copies what it needs
 * first (the infer codec does).
 *
 * @param request the aggregated request; its body is released by the router after {@code serve}
 * @param segments the decoded path segments, starting with {@code "v2"}
 * @param path the raw path, without the query, for error messages
 * @param reply the single reply
 * @param model the model of a {@code /v2/models/<m>/...} path; {@code ""} elsewhere (server-wide)
 * @param version the version of a {@code .../versions/<v>/...} path; {@link InferenceRequest#LATEST} otherwise
 * @param action the endpoint after a model (and version): {@code ""} for the model itself,
 *     {@code "ready"}, {@code "infer"}, ...; {@code ""} for a server-wide path
 */
record RestCall(FullHttpRequest request, List<String> segments, String path, Reply reply, String model, long version, String action) {
    RestCall {
        requireNonNull(request, "request is null");
        segments = List.copyOf(segments);
        requireNonNull(path, "path is null");
        requireNonNull(reply, "reply is null");
        requireNonNull(model, "model is null");
        requireNonNull(action, "action is null");
    }

    /** A server-wide call: no model, no version, no action. */
    static RestCall of(FullHttpRequest request, List<String> segments, String path, Reply reply) {
        return new RestCall(request, segments, path, reply, "", InferenceRequest.LATEST, "");
    }

    HttpMethod method() {
        return request.method();
    }

    boolean keepAlive() {
        return reply.keepAlive;
    }

    /** Throws the 405 answer unless the request's method is {@code expected}. */
    void requireMethod(HttpMethod expected) {
        RestErrors.requireMethod(request.method(), expected, path);
    }

    /** The 404 answer for this path, to throw. */
    BackplaneException notFound() {
        return RestErrors.notFound(path);
    }

    /** Answers 200 with the JSON {@code body}. */
    void sendJson(ByteBuf body) {
        sendJson(HttpResponseStatus.OK, body);
    }

    /** Answers {@code status} with the JSON {@code body}. */
    void sendJson(HttpResponseStatus status, ByteBuf body) {
        reply.send(Responses.json(status, body, reply.keepAlive));
    }

    /** Answers {@code status} with an empty body. */
    void sendEmpty(HttpResponseStatus status) {
        reply.send(Responses.empty(status, reply.keepAlive));
    }
}
