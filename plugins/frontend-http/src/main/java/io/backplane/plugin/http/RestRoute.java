package io.backplane.plugin.http;

/**
 * One family of REST endpoints: the seam between {@link RestRouter} and the handlers. The router
 * decodes the path, applies the checks every endpoint shares (malformed request, draining,
 * restricted APIs, the {@code /v2} prefix, the model and version of a model-scoped path) and hands
 * the {@link RestCall} to the one route registered for it.
 *
 * <p>A route must answer the call exactly once, through {@code call.reply()}, either before it
 * returns or later from any thread; or throw, and the router answers the exception (its
 * {@link RestErrors#errorResponse category's status}). It is called on a Netty event loop and
 * must never block it: blocking work goes to an executor (as {@link RepositoryHandler} does).
 * Routes are shared by every connection: all state is per call. A route never depends on the
 * router or on another route (an ArchUnit rule in {@code HttpArchitectureTest} keeps it so); what
 * two routes share lives in a helper ({@link Reply}, {@link Responses}, {@link RestErrors},
 * {@link Json}, the codecs).
 *
 * <p>Adding an extension is one class implementing this interface plus one registration in
 * {@link RestRouter}'s constructor.
 */
@FunctionalInterface
interface RestRoute {
    void serve(RestCall call);
}
